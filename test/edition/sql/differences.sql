-- What the SQL edition does differently from the C build, row by row of
-- docs/managed.md's "What differs" that no other test pins (the edition
-- only: test/edition/regress.sh runs it after setup).
\set SHOW_CONTEXT never
\set VERBOSITY default
-- counters: no shared memory, so as the C build without the preload
SELECT claims_new, completes, stats_reset FROM idem_stats();
SELECT count(*) AS databases FROM idem_stats_databases();
SELECT idem_stats_reset();
SELECT claims_new IS NULL AS no_counters, processing_keys >= 0 AS counts_keys, table_bytes > 0 AS has_size FROM idempotency_stats;
-- Citus: refused
SELECT idem_distribute();
-- no lock guard: an application role can lock the table like any table it may write
CREATE ROLE diff_app;
GRANT idempotency_app TO diff_app;
SET ROLE diff_app;
BEGIN;
LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE NOWAIT;
SELECT mode FROM pg_locks WHERE relation = 'idempotency_keys'::regclass AND pid = pg_backend_pid() AND mode = 'AccessExclusiveLock';
ROLLBACK;
-- a NULL token: allowed where this transaction last wrote the key's row (the C build: IK005 here,
-- the claim was made in another transaction)
SELECT token AS t FROM idem_claim('diff-1', '{}') \gset
BEGIN;
SELECT idem_heartbeat('diff-1', '', :t) > now() AS renewed;
SELECT idem_complete('diff-1', 200, '{"ok": true}');
COMMIT;
SELECT status FROM idem_lookup('diff-1');
-- after idem_resolve(..., 'fail') in the claiming transaction: IK003 (the C build: IK002)
RESET ROLE;
BEGIN;
SELECT outcome FROM idem_claim('diff-2', '{}');
SELECT idem_resolve('diff-2', '', 'fail');
\set VERBOSITY sqlstate
SELECT idem_complete('diff-2', 200, '{}');
\set VERBOSITY default
ROLLBACK;
-- after idem_expire held a stale key (stale_policy hold) in the same transaction, a call without
-- a token is taken (the row's xmin is this transaction's; the C build: IK005)
SET idempotency.stale_policy = 'hold';
SELECT outcome FROM idem_claim('diff-3', '{}', lease => '10 ms');
SELECT pg_sleep(0.05);
BEGIN;
SELECT idem_expire();
SELECT idem_complete('diff-3', 200, '{"by": "not the holder"}');
COMMIT;
SELECT status, response FROM idem_lookup('diff-3');
RESET idempotency.stale_policy;
-- idempotency_edition.execute_subxacts, which the caller can set, counts idem_execute's short
-- way: a value that is no count is taken as all used (the general way), never an error
SET ROLE diff_app;
SET idempotency_edition.execute_subxacts = 'x';
SELECT outcome FROM idem_execute('diff-4', '{}', '', 200, 'SELECT 1 AS one');
SELECT current_setting('idempotency_edition.execute_subxacts') AS after_general_way;
SET idempotency_edition.execute_subxacts = '-1';
SELECT outcome FROM idem_execute('diff-4', '{}', '', 200, 'SELECT 1 AS one');
SET idempotency_edition.execute_subxacts = '99999999999';
SELECT outcome FROM idem_execute('diff-5', '{}', '', 200, 'SELECT 1 AS one');
RESET idempotency_edition.execute_subxacts;
RESET ROLE;
DROP ROLE diff_app;
DELETE FROM idempotency_keys WHERE key LIKE 'diff-%';
-- recorded row level security: a policy not recorded stops idem_claim,
-- idem_complete and idem_execute for the callers the policies apply to (a
-- role of idempotency_app), not the superuser (the C build stops both);
-- the other key functions stop both
CREATE ROLE diff_tenant;
GRANT idempotency_app TO diff_tenant;
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY diff_all ON idempotency_keys USING (true);
BEGIN;
SELECT outcome AS superuser_claims FROM idem_claim('diff-6');
ROLLBACK;
SELECT count(*) AS superuser_looks_up FROM idem_lookup('diff-6', '');
SET ROLE diff_tenant;
SELECT outcome AS tenant_claims FROM idem_claim('diff-6');
RESET ROLE;
DROP POLICY diff_all ON idempotency_keys;
ALTER TABLE idempotency_keys DISABLE ROW LEVEL SECURITY;
DROP ROLE diff_tenant;
