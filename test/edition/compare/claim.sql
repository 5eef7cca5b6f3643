-- test/edition/compare/claim.sql: idem_claim on the C build and on the SQL
-- edition in one database, side by side.  Install both (the C extension in
-- public, the edition's plain script in schema ed), then run this once per
-- schema and diff the two outputs, which must be the same (lease_len and
-- due_len, intervals between two clock readings, are rounded to the second):
-- test/edition/compare.sh does so (edition/compare/claim).
--   psql -X -a -d DB -v s=public -f claim.sql 2>&1 | grep -vE '^(CONTEXT|LOCATION|PL/pgSQL|SQL statement)' | sed 's/^psql:[^:]*:[0-9]*: //' >c.out
--   psql -X -a -d DB -v s=ed     -f claim.sql 2>&1 | (same filter) >ed.out
--   diff c.out ed.out
-- Covers: new, replay, IK001, in_progress (wait => false), reclaimed after
-- the lease ran out (recovery point), stale under hold, attempts exhausted
-- (a stale claim, a retryable failure, max_attempts as the argument and as
-- the setting), the input errors (SQLSTATE, message, detail, hint) and a
-- read-only transaction.  Rows: every column but times and tokens.
\set VERBOSITY verbose
SET search_path = :s;
\pset null '<null>'
CREATE TEMP VIEW v AS SELECT scope, key, status, response_code, response, request_hash IS NOT NULL AS hashed,
  attempts, retryable, recovery_point, locked_until IS NOT NULL AS leased, token > 0 AS token_ok,
  expires_at > updated_at AS expires_later, due_at IS NOT NULL AS due, round(extract(epoch FROM locked_until - updated_at)) AS lease_len, expires_at - coalesce(locked_until, updated_at) AS ret_len, round(extract(epoch FROM due_at - coalesce(locked_until, updated_at))) AS due_len, created_at = updated_at AS c_eq_u FROM idempotency_keys;
-- new
SELECT outcome, token IS NOT NULL AS t, status, response_code, response, retry_after, recovery_point FROM idem_claim('k1', '{"a": 1}', 'sc', lease => '1 h');
SELECT * FROM v WHERE key = 'k1';
-- replay
SELECT idem_complete('k1', 201, '{"id": 7}', 'sc', (SELECT token FROM idempotency_keys WHERE key = 'k1'));
SELECT outcome, token IS NOT NULL AS t, status, response_code, response, retry_after, recovery_point FROM idem_claim('k1', '{"a": 1}', 'sc');
SELECT * FROM v WHERE key = 'k1';
-- IK001
SELECT outcome FROM idem_claim('k1', '{"a": 2}', 'sc');
SELECT outcome FROM idem_claim('k1', NULL, 'sc');
-- in_progress, wait false (a claim another transaction made)
SELECT outcome FROM idem_claim('k2', NULL, 'sc', lease => '1 h');
SELECT outcome, token IS NOT NULL AS t, status, response_code, response, retry_after > '59 min' AS ra, recovery_point FROM idem_claim('k2', NULL, 'sc', wait => false);
SELECT outcome, token IS NOT NULL AS t, status, retry_after > '59 min' AS ra FROM idem_claim('k2', NULL, 'sc');
-- reclaimed after the lease runs out, with a recovery point
SELECT outcome FROM idem_claim('k3', '[1]', 'sc', lease => '1 ms');
UPDATE idempotency_keys SET recovery_point = 'step-2' WHERE key = 'k3';
SELECT pg_sleep(0.05);
SELECT outcome, token IS NOT NULL AS t, status, response_code, response, retry_after, recovery_point FROM idem_claim('k3', '[1]', 'sc');
SELECT * FROM v WHERE key = 'k3';
-- stale under hold
SELECT outcome FROM idem_claim('k4', NULL, 'sc', lease => '1 ms');
SELECT idem_checkpoint('k4', 'half', 'sc', (SELECT token FROM idempotency_keys WHERE key = 'k4'));
SELECT pg_sleep(0.05);
SET idempotency.stale_policy = 'hold';
SELECT outcome, token IS NOT NULL AS t, status, response_code, response, retry_after, recovery_point FROM idem_claim('k4', NULL, 'sc');
SELECT outcome, token IS NOT NULL AS t, status, retry_after, recovery_point FROM idem_claim('k4', NULL, 'sc', wait => false);
SELECT * FROM v WHERE key = 'k4';
RESET idempotency.stale_policy;
-- attempts exhausted: a stale claim, and a retryable failure
SELECT outcome FROM idem_claim('k5', NULL, 'sc', lease => '1 ms');
SELECT pg_sleep(0.05);
SELECT outcome, token IS NOT NULL AS t, status, response_code, response, retry_after, recovery_point FROM idem_claim('k5', NULL, 'sc', max_attempts => 1);
SELECT * FROM v WHERE key = 'k5';
SELECT outcome, status, response FROM idem_claim('k5', NULL, 'sc', max_attempts => 1);
SELECT outcome FROM idem_claim('k6', '{"x": 1}', 'sc');
SELECT idem_fail('k6', 'sc', (SELECT token FROM idempotency_keys WHERE key = 'k6'), 503, '{"err": "down"}', true);
SELECT outcome, token IS NOT NULL AS t, status, response_code, response FROM idem_claim('k6', '{"x": 1}', 'sc', max_attempts => 2);
SELECT idem_fail('k6', 'sc', (SELECT token FROM idempotency_keys WHERE key = 'k6'), 503, '{"err": "down2"}', true);
SELECT outcome, token IS NOT NULL AS t, status, response_code, response FROM idem_claim('k6', '{"x": 1}', 'sc', max_attempts => 2);
SELECT * FROM v WHERE key = 'k6';
SET idempotency.max_attempts = 1;
SELECT outcome FROM idem_claim('k7', NULL, 'sc');
SELECT idem_fail('k7', 'sc', (SELECT token FROM idempotency_keys WHERE key = 'k7'), 500, NULL, true);
SELECT outcome, status, response_code, response FROM idem_claim('k7', NULL, 'sc');
RESET idempotency.max_attempts;
-- input errors
SELECT outcome FROM idem_claim(NULL);
SELECT outcome FROM idem_claim('a', NULL, NULL);
SELECT outcome FROM idem_claim('');
SELECT outcome FROM idem_claim(repeat('x', 256));
SELECT outcome FROM idem_claim('ok', NULL, repeat('y', 256));
SELECT outcome FROM idem_claim(E'a\tb');
SELECT outcome FROM idem_claim('ok', NULL, E'sc\x7f');
SELECT outcome FROM idem_claim('ok', lease => '-1 s');
SELECT outcome FROM idem_claim('ok', lease => '0');
SELECT outcome FROM idem_claim('ok', lease => '101 years');
SELECT outcome FROM idem_claim('ok', retention => '-1 day');
SELECT outcome FROM idem_claim('ok', retention => '200 years');
SELECT outcome FROM idem_claim('ok', wait => NULL);
SELECT outcome FROM idem_claim('ok', max_attempts => -1);
SELECT outcome FROM idem_claim('ok', await_result => '-1 s');
SELECT outcome FROM idem_claim('ok', await_result => '2 h');
SELECT outcome FROM idem_claim('ok', request => 'null');
SELECT count(*) AS rows_ok FROM idempotency_keys WHERE key = 'ok';
BEGIN READ ONLY;
SELECT outcome FROM idem_claim('ro');
ROLLBACK;
SELECT l.status, l.response, l.attempts FROM idem_lookup('k1', 'sc') l;
