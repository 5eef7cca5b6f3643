-- Expiry costs per batch what the batch changes, whatever the backlog: a
-- backlog of 5,000 due rows (as ALTER EXTENSION ... UPDATE from 0.2.0
-- leaves every row) and of 2,000 stale claims held under stale_policy =
-- hold.  Counted in rows read (deterministic), not in time.
DELETE FROM idempotency_keys;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, due_at)
SELECT 'backlog', 'k' || i, 'completed', i, now(), now(), now() + interval '1 day', 200, now() - interval '1 s'
FROM generate_series(1, 5000) i;
ANALYZE idempotency_keys;

-- rows of the table read (by sequential and index scans) since the
-- backend's statistics were last flushed (each measured transaction
-- follows a forced flush)
CREATE FUNCTION rows_read() RETURNS bigint LANGUAGE sql
    AS $$ SELECT pg_stat_get_xact_tuples_returned('idempotency_keys'::regclass)
               + pg_stat_get_xact_tuples_fetched('idempotency_keys'::regclass) $$;

-- one batch of 100: every row it takes needs only a later due time
-- (VACUUM first: index entries of dead rows count as read until then)
VACUUM idempotency_keys;
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT idem_expire(100) AS expired_or_deleted;
SELECT rows_read() < 1000 AS reads_follow_the_batch;
COMMIT;
SELECT count(*) AS still_due FROM idempotency_keys WHERE due_at <= now();

-- stale claims held under hold leave the due range, and come back once
-- the policy is reclaim
SET idempotency.stale_policy = 'hold';
DELETE FROM idempotency_keys;
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at, expires_at, due_at)
SELECT 'held', 'h' || i, 'processing', i, now() - interval '1 min', now(), now(), now() + interval '1 day', now() - interval '1 min'
FROM generate_series(1, 2000) i;
SELECT idem_expire() AS held_untouched;
SELECT count(*) FILTER (WHERE due_at = 'infinity') AS held_out_of_range, count(*) FILTER (WHERE status = 'processing') AS processing
FROM idempotency_keys;
VACUUM idempotency_keys;
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT idem_expire(100) AS nothing_due;
SELECT rows_read() < 100 AS held_not_scanned;
COMMIT;
RESET idempotency.stale_policy;
SELECT idem_expire(500) AS expired_after_policy_change;
SELECT count(*) FILTER (WHERE status = 'failed' AND retryable) AS takeover_ready FROM idempotency_keys;

DROP FUNCTION rows_read();
DELETE FROM idempotency_keys;

-- rows written by hand with times no claim writes (a tenant may INSERT its
-- own rows): a pass still ends, and other rows are still expired
DELETE FROM idempotency_keys;
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at, expires_at, due_at)
SELECT 'odd', 'no-lease-' || i, 'processing', -i, NULL, now(), now(), now() + interval '30 days', 'infinity'
FROM generate_series(1, 300) i;
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at, expires_at, due_at)
SELECT 'odd', 'no-expiry-' || i, 'processing', -1000 - i, now() + interval '1 year', now(), now(), '-infinity', '-infinity'
FROM generate_series(1, 300) i;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, due_at)
VALUES ('other', 'old', 'completed', 1, now(), now(), now() - interval '1 s', 200, now() - interval '1 s');
SET idempotency.stale_policy = 'hold';
SELECT idem_expire() AS held_pass_ends;
SELECT count(*) AS other_left FROM idempotency_keys WHERE scope = 'other';
SELECT idem_expire() AS held_pass_ends_again;
RESET idempotency.stale_policy;
SELECT idem_expire() AS reclaim_pass_ends;
SELECT count(*) FILTER (WHERE status = 'processing') AS processing_left FROM idempotency_keys WHERE scope = 'odd';
DELETE FROM idempotency_keys;

-- rows whose own times never come (a tenant may INSERT its own: expires_at
-- infinity, a lease to infinity) written due at infinity, where the stale
-- claims hold leaves are: a pass gives them a due time no pass reaches, so
-- that under reclaim they neither stand in front of a held stale claim
-- (more of them than a batch) nor are locked again at every pass
DELETE FROM idempotency_keys;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, due_at)
SELECT 'never', 'c' || i, 'completed', i, now(), now(), 'infinity', 200, 'infinity'
FROM generate_series(1, 10050) i;
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at, expires_at, due_at)
SELECT 'never', 'p' || i, 'processing', 20000 + i, 'infinity', now(), now(), 'infinity', 'infinity'
FROM generate_series(1, 50) i;
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at, expires_at, due_at)
VALUES ('held', 'stale', 'processing', 30000, now() - interval '1 min', now(), now(), now() + interval '1 day', 'infinity');
SELECT idem_expire() AS stale_claim_expired;
SELECT status, retryable, due_at = expires_at AS due_at_expiry FROM idempotency_keys WHERE scope = 'held';
SELECT count(*) FILTER (WHERE due_at = 'infinity') AS never_left_at_infinity,
       count(*) FILTER (WHERE due_at = '9999-12-31 00:00:00+00') AS never_due
FROM idempotency_keys WHERE scope = 'never';
CREATE TEMP TABLE never_before AS SELECT key, xmax::text AS locker FROM idempotency_keys WHERE scope = 'never';
SELECT idem_expire() AS nothing_to_do;
SELECT count(*) AS never_locked_again FROM idempotency_keys k JOIN never_before b USING (key)
WHERE k.scope = 'never' AND k.xmax::text <> b.locker;
DROP TABLE never_before;
DELETE FROM idempotency_keys;
