-- idem_claim: every outcome, and the request check on every path.
\set SHOW_CONTEXT never

-- new: the row is processing, a token is handed out
SELECT outcome, token > 0 AS has_token, status, response_code, response, retry_after, recovery_point
FROM idem_claim('pay-1', request => '{"order": "A1", "amount": 3000}', scope => 'm42');

-- the in-transaction pattern: claim, work, complete (no token needed), commit
BEGIN;
SELECT outcome FROM idem_claim('pay-2', '{"order": "A2", "amount": 100}', 'm42');
SELECT idem_complete('pay-2', 201, '{"payment_id": 981, "note": "ok"}', 'm42');
COMMIT;

-- replay: stored code and body, equal byte for byte; no token is leaked
SELECT outcome, token, status, response_code, response
FROM idem_claim('pay-2', '{"order": "A2", "amount": 100}', 'm42');
SELECT (SELECT response FROM idem_claim('pay-2', '{"order": "A2", "amount": 100}', 'm42'))::text
     = (SELECT response FROM idempotency_keys WHERE key = 'pay-2')::text AS same_bytes;

-- equal JSON documents are the same request, whatever their key order and spacing
SELECT outcome FROM idem_claim('pay-2', '{ "amount" : 100.00, "order":"A2" }', 'm42');

-- a different request with the same key is an error, on every path
SELECT * FROM idem_claim('pay-2', '{"order": "A2", "amount": 101}', 'm42');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('pay-2', NULL, 'm42');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('pay-1', '{"order": "A1", "amount": 1}', 'm42');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('nobody', NULL, 'm42');
SELECT idem_complete('nobody', 204, NULL, 'm42', (SELECT token FROM idempotency_keys WHERE key = 'nobody'));
SELECT * FROM idem_claim('nobody', '{}', 'm42');
\echo :LAST_ERROR_SQLSTATE
-- no request stored and none given: the same request
SELECT outcome, response_code, response FROM idem_claim('nobody', NULL, 'm42');

-- in_progress: a committed claim whose lease is alive
SELECT outcome, token, status, retry_after > '0' AND retry_after <= '60 s' AS retry_after_ok
FROM idem_claim('pay-1', '{"amount": 3000, "order": "A1"}', 'm42');
-- ... also when the same transaction claims the key twice
BEGIN;
SELECT outcome FROM idem_claim('twice', NULL, 'm42');
SELECT outcome FROM idem_claim('twice', NULL, 'm42');
ROLLBACK;
-- rolled back: the key is free again
SELECT count(*) FROM idem_lookup('twice', 'm42');

-- scopes are independent: the same key in another scope is another key
SELECT outcome FROM idem_claim('pay-2', '{"order": "A2", "amount": 999}', 'm43');

-- reclaimed: the lease ran out; a new, larger token; the recovery point comes back
SELECT token AS old_token FROM idem_claim('slow', '{"x": 1}', 'm42', lease => '10 ms') \gset
SELECT idem_checkpoint('slow', 'card-authorized', 'm42', :old_token);
SELECT pg_sleep(0.05);
SELECT outcome, token > :old_token AS larger_token, status, recovery_point
FROM idem_claim('slow', '{"x": 1}', 'm42');
-- the old holder is fenced off
SELECT idem_complete('slow', 200, '{}', 'm42', :old_token);
\echo :LAST_ERROR_SQLSTATE

-- failed, retryable: the next claim takes the key over
BEGIN;
SELECT outcome FROM idem_claim('flaky', NULL, 'm42');
SELECT idem_fail('flaky', 'm42', response_code => 503, response => '{"error": "bank timeout"}');
COMMIT;
SELECT status, retryable, response_code FROM idempotency_keys WHERE key = 'flaky';
SELECT outcome, status, response_code, response FROM idem_claim('flaky', NULL, 'm42');

-- failed, not retryable: the stored error is replayed
BEGIN;
SELECT outcome FROM idem_claim('declined', '{"card": "4000..0002"}', 'm42');
SELECT idem_fail('declined', 'm42', NULL, 402, '{"error": "card_declined"}', retryable => false);
COMMIT;
SELECT outcome, status, response_code, response FROM idem_claim('declined', '{"card": "4000..0002"}', 'm42');

-- stale: under stale_policy = hold nobody takes a run-out lease over
SET idempotency.stale_policy = 'hold';
SELECT token AS held_token FROM idem_claim('held', NULL, 'm42', lease => '10 ms') \gset
SELECT pg_sleep(0.05);
SELECT outcome, token, status FROM idem_claim('held', NULL, 'm42');
-- until an operator settles it
SELECT idem_resolve('held', 'm42', 'fail', 502, '{"error": "settled by operator"}');
SELECT outcome, status, response_code, response FROM idem_claim('held', NULL, 'm42');
SELECT idem_complete('held', 200, '{}', 'm42', :held_token);
\echo :LAST_ERROR_SQLSTATE
RESET idempotency.stale_policy;

-- past expires_at the key starts afresh, whatever request it had
BEGIN;
SELECT outcome FROM idem_claim('short', '{"v": 1}', 'm42', retention => '10 ms');
SELECT idem_complete('short', 200, '{"v": 1}', 'm42');
COMMIT;
SELECT pg_sleep(0.05);
SELECT outcome, status, response FROM idem_claim('short', '{"v": 2}', 'm42');
SELECT request_hash = idem_request_hash('{"v": 2}'::jsonb) AS new_hash, response IS NULL AS no_response
FROM idempotency_keys WHERE key = 'short';

-- a claim needs a read-write transaction
BEGIN READ ONLY;
SELECT * FROM idem_claim('ro', NULL, 'm42');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- lease and retention must be positive
SELECT * FROM idem_claim('bad-lease', NULL, 'm42', lease => '0');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('bad-retention', NULL, 'm42', retention => '-1 s');
\echo :LAST_ERROR_SQLSTATE
-- checked as now + interval, months as the calendar counts them: this one
-- compares above zero (12 months = 360 days there) but moves now back 5 or
-- 6 days; as a retention it made a completed key born expired, so that the
-- client's retry got 'new' (issue 10)
SELECT * FROM idem_claim('bad-calendar', NULL, 'm42', retention => '-1 year 360 days 1 sec');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('bad-calendar', NULL, 'm42', lease => '-1 year 360 days 1 sec');
\echo :LAST_ERROR_SQLSTATE
-- and sane at the far end: at most a century
SELECT * FROM idem_claim('bad-far', NULL, 'm42', retention => '101 years');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('bad-far', NULL, 'm42', lease => '1000000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('bad-far', NULL, 'm42', lease => '50 years', retention => '-2147483647 days');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('bad-far', NULL, 'm42', lease => '2147483647 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_claim('ok-far', NULL, 'm42', lease => '1 hour', retention => '99 years');
SELECT expires_at - now() > interval '98 years' AS kept_long FROM idem_lookup('ok-far', 'm42');
SELECT count(*) FROM idempotency_keys WHERE key IN ('bad-calendar', 'bad-far');
SELECT * FROM idem_claim('bad-wait', NULL, 'm42', wait => NULL);
\echo :LAST_ERROR_SQLSTATE

-- tokens are never reused, not even after a key is deleted and claimed anew
SELECT token AS t1 FROM idem_claim('again', NULL, 'm42') \gset
SELECT idem_release('again', 'm42', :t1);
SELECT token > :t1 AS larger FROM idem_claim('again', NULL, 'm42');

-- a transaction may claim any number of keys: at most 64 key locks are held
-- (10,000 is more than the shared lock table holds at the default settings)
BEGIN;
SELECT count(*) AS claimed FROM generate_series(1, 10000) i, idem_claim('batch-' || i, NULL, 'batch');
SELECT count(*) AS claimed_nowait FROM generate_series(1, 1000) i, idem_claim('batch-nowait-' || i, NULL, 'batch', wait => false);
SELECT count(*) AS locks_held FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory';
COMMIT;
SELECT count(*) AS stored FROM idempotency_keys WHERE scope = 'batch';

-- a processing row without a lease end (the table allows one: written by
-- hand) is stale, as expiry counts it: a claim takes it over (it went
-- round 100 times, 40001, a retry that never ends)
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at, expires_at)
VALUES ('hand', 'no-lease', 'processing', -77, NULL, now(), now(), now() + interval '1 hour');
SELECT outcome, status, token > 0 AS new_token FROM idem_claim('no-lease', NULL, 'hand');
DELETE FROM idempotency_keys WHERE scope = 'hand';
