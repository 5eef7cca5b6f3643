-- A key's lock id is no function a tenant can compute: were it (a 64-bit
-- lookup3 hash of scope and key, which is invertible), tenant A could find
-- a key in its own scope whose lock id is tenant B's key's, claim it, keep
-- its transaction open and stall B's claims of that key.  It is keyed with
-- a secret of the server (src/hash.c, IdemKeyLockId).
BEGIN;
SELECT outcome FROM idem_claim('b-order-1', NULL, 'tenant_b');
SELECT count(*) AS key_locks,
       count(*) FILTER (WHERE ((classid::bigint << 32) | objid::bigint)
                        = hashtextextended('b-order-1', hashtextextended('tenant_b', 1768187245))) AS computable
FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 7653 AND pid = pg_backend_pid();
ROLLBACK;

-- the same key's lock is the same lock for every backend: a second
-- session's claim waits for it (isolation: claim_commit, claim_rollback);
-- and different keys, scopes, or a split of the same bytes between them,
-- have different ids
BEGIN;
SELECT count(*) FROM (VALUES ('ab', 'c'), ('a', 'bc'), ('', 'abc'), ('abc', 'd')) AS t(s, k), idem_claim(k, NULL, s);
SELECT count(DISTINCT (classid, objid)) AS distinct_ids
FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 7653 AND pid = pg_backend_pid();
ROLLBACK;

-- idem_key_lock() is the statement a claim routes on Citus: on a server
-- without Citus it refuses (0A000), so that no role can test or hold a
-- key's lock with it (the claim takes the lock itself there)
SELECT idem_key_lock('tenant_b', 'b-order-1', 2);
SELECT idem_key_lock('tenant_b', 'b-order-1', 0);
