-- idem_expire: stale claims become takeover-ready, rows past expires_at go.
\set SHOW_CONTEXT never

-- a fresh table for this test
DELETE FROM idempotency_keys;
-- 3 stale claims, 2 live ones, 4 finished rows past retention, 1 live finished row
SELECT count(*) FROM generate_series(1, 3) i, idem_claim('stale-' || i, NULL, 'exp', lease => '1 ms');
SELECT count(*) FROM generate_series(1, 2) i, idem_claim('live-' || i, NULL, 'exp');
BEGIN;
SELECT count(*) FROM generate_series(1, 4) i, idem_claim('old-' || i, NULL, 'exp', retention => '1 ms');
SELECT count(*) FROM generate_series(1, 4) i, idem_complete('old-' || i, 200, '{}', 'exp');
SELECT outcome FROM idem_claim('done', NULL, 'exp');
SELECT idem_complete('done', 200, '{}', 'exp');
COMMIT;
SELECT pg_sleep(0.05);

-- max_rows bounds one call
SELECT idem_expire(2);
SELECT idem_expire();
SELECT idem_expire();
SELECT key, status, retryable, locked_until IS NULL AS lease_cleared
FROM idempotency_keys WHERE scope = 'exp' ORDER BY key;

-- the holder of an expired claim is refused; the next claim takes it over
SELECT idem_complete('stale-1', 200, '{}', 'exp', (SELECT token FROM idempotency_keys WHERE key = 'stale-1'));
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_claim('stale-1', NULL, 'exp');

-- under stale_policy = hold, stale claims stay for an operator, even past expires_at
SET idempotency.stale_policy = 'hold';
SELECT outcome FROM idem_claim('hold-me', NULL, 'exp', lease => '1 ms', retention => '1 ms');
SELECT pg_sleep(0.05);
SELECT idem_expire();
SELECT key, status FROM idempotency_keys WHERE key = 'hold-me';
SELECT outcome FROM idem_claim('hold-me', NULL, 'exp');
RESET idempotency.stale_policy;
-- under reclaim, a processing row past expires_at is deleted
SELECT idem_expire();
SELECT count(*) FROM idempotency_keys WHERE key = 'hold-me';

SELECT idem_expire(0);
\echo :LAST_ERROR_SQLSTATE
BEGIN READ ONLY;
SELECT idem_expire();
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
