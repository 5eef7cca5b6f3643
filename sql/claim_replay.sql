-- A replay, and every call that looks like one but is not: the SQL edition
-- answers a replay with defaults in one query, and must answer each call
-- below as the C build does (each a check made before the replay).
\set VERBOSITY terse
SELECT outcome, token AS t FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay') \gset
SELECT :'outcome' AS outcome, idem_complete('r1', 201, '{"id": 1}', 'replay', :t);
-- a replay; the same request spelled otherwise is one too
SELECT outcome, status, response_code, response, token IS NULL AS no_token, retry_after, recovery_point
  FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay');
SELECT outcome, response FROM idem_claim('r1', '{"b": "x",  "a": 1.00}', 'replay');
-- another request, or none: IK001
SELECT outcome FROM idem_claim('r1', '{"a": 2, "b": "x"}', 'replay');
SELECT outcome FROM idem_claim('r1', NULL, 'replay');
-- checks made before any row is read: refused
BEGIN READ ONLY;
SELECT outcome FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay');
ROLLBACK;
-- (a request too deep for the edition's jsonpath: refused before it is hashed, in a new session)
\c
BEGIN READ ONLY;
SELECT outcome FROM idem_claim('r1', (repeat('[', 11000) || repeat(']', 11000))::jsonb, 'replay');
ROLLBACK;
SELECT outcome FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay', wait => NULL);
SELECT outcome FROM idem_claim('r1', '{"a": 1, "b": "x"}', NULL);
SELECT outcome FROM idem_claim('r1' || chr(1), '{"a": 1, "b": "x"}', 'replay');
SELECT outcome FROM idem_claim(repeat('r', 256), '{"a": 1, "b": "x"}', 'replay');
SET idempotency.max_key_length = 1;
SELECT outcome FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay');
RESET idempotency.max_key_length;
SELECT outcome FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay', lease => '-1 s');
-- given times or settings do not change a replay's answer
SELECT outcome, response FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay', lease => '5 s', retention => '1 h',
                                         max_attempts => 3, await_result => '1 s', wait => false);
SET idempotency.lease = '5s';
SET idempotency.max_attempts = 2;
SELECT outcome, response FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay');
RESET idempotency.lease;
RESET idempotency.max_attempts;
-- no request stored: a replay only without one
SELECT outcome, token AS t FROM idem_claim('r2', NULL, 'replay') \gset
SELECT :'outcome' AS outcome, idem_complete('r2', 200, '{"id": 2}', 'replay', :t);
SELECT outcome, response FROM idem_claim('r2', NULL, 'replay');
SELECT outcome FROM idem_claim('r2', '{}', 'replay');
-- failed for good: a replay; failed, retryable: taken over
SELECT outcome, token AS t FROM idem_claim('r3', '{}', 'replay') \gset
SELECT :'outcome' AS outcome, idem_fail('r3', 'replay', :t, response_code => 422, response => '{"e": 1}', retryable => false);
SELECT outcome, status, response_code, response FROM idem_claim('r3', '{}', 'replay');
SELECT outcome, token AS t FROM idem_claim('r4', '{}', 'replay') \gset
SELECT :'outcome' AS outcome, idem_fail('r4', 'replay', :t, response_code => 503, retryable => true);
SELECT outcome, status, token IS NOT NULL AS has_token FROM idem_claim('r4', '{}', 'replay');
-- in flight (the claim just above): in_progress
SELECT outcome, status, response, retry_after > interval '0' AS retry_later FROM idem_claim('r4', '{}', 'replay');
-- in flight, its lease run out: taken over (a new token), with another request: IK001
UPDATE idempotency_keys SET locked_until = clock_timestamp() - interval '1 s'
 WHERE scope = 'replay' AND key = 'r4';
SELECT outcome FROM idem_claim('r4', '{"x": 1}', 'replay');
SELECT outcome, status, token > :t AS newer_token FROM idem_claim('r4', '{}', 'replay');
-- row level security recorded but not in place: refused (IK006), as any key function
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY replay_all ON idempotency_keys USING (true);
SELECT idem_save_row_security() AS saved;
ALTER TABLE idempotency_keys DISABLE ROW LEVEL SECURITY;
SELECT outcome FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay');
DELETE FROM idempotency_row_security;
DROP POLICY replay_all ON idempotency_keys;
SELECT outcome FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay');
-- completed but expired: claimed anew
UPDATE idempotency_keys SET expires_at = clock_timestamp() - interval '1 s', due_at = clock_timestamp() - interval '1 s'
 WHERE scope = 'replay' AND key = 'r1';
SELECT outcome, status, response FROM idem_claim('r1', '{"a": 1, "b": "x"}', 'replay');
DELETE FROM idempotency_keys WHERE scope = 'replay';
