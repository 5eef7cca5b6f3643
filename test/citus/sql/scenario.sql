-- test/citus/sql/scenario.sql: every function and outcome the README
-- documents, compactly (the regress scenarios of sql/claim.sql, record.sql,
-- execute.sql).  Run by test/citus/checks.sh with psql -a and
-- VERBOSITY=sqlstate in three ways, each in its own scope :'s' on fresh keys:
-- through the coordinator before the functions are distributed, on the
-- worker that holds the scope's shard, and through the coordinator with the
-- functions distributed (autocommit calls delegated).  The output must equal
-- expected/scenario.out, which is what a single PostgreSQL server answers.
-- Tokens are never printed (they differ between nodes), only compared.
\set SHOW_CONTEXT never

-- new, then replay of a completed key (in-transaction pattern, no token)
SELECT outcome, token IS NOT NULL AS has_token, status
FROM idem_claim('k-new', '{"amount": 1}', :'s');
BEGIN;
SELECT outcome FROM idem_claim('k-tx', '{"amount": 2}', :'s');
SELECT idem_complete('k-tx', 201, '{"id": 2}', :'s');
COMMIT;
SELECT outcome, token, status, response_code, response FROM idem_claim('k-tx', '{"amount": 2}', :'s');
SELECT outcome FROM idem_claim('k-tx', '{ "amount" : 2.0 }', :'s');
-- mismatch: IK001
SELECT outcome FROM idem_claim('k-tx', '{"amount": 3}', :'s');
SELECT outcome FROM idem_claim('k-tx', NULL, :'s');
-- in_progress: a committed claim whose lease is alive
SELECT outcome, token, retry_after > '0' AS has_retry_after FROM idem_claim('k-new', '{"amount": 1}', :'s');
SELECT outcome FROM idem_claim('k-new', '{"amount": 1}', :'s', wait => false);

-- the cross-transaction pattern with tokens
SELECT token AS t1 FROM idem_claim('k-x', '{"n": 1}', :'s', lease => '30 s') \gset
SELECT idem_heartbeat('k-x', :'s', :t1, lease => '40 s') > now() + interval '30 s' AS extended;
SELECT idem_checkpoint('k-x', 'authorized', :'s', :t1);
SELECT recovery_point, status FROM idem_lookup('k-x', :'s');
SELECT idem_complete('k-x', 201, '{"payment_id": 7}', :'s', token => :t1);
SELECT outcome, response_code, response FROM idem_claim('k-x', '{"n": 1}', :'s');
-- the key is no longer processing: IK003 for every holder call
SELECT idem_complete('k-x', 201, '{}', :'s', token => :t1);
SELECT idem_fail('k-x', :'s', :t1);
SELECT idem_heartbeat('k-x', :'s', :t1);
SELECT idem_checkpoint('k-x', 'p', :'s', :t1);
SELECT idem_release('k-x', :'s', :t1);
-- no token outside the claiming transaction: IK005; no such key: IK004
SELECT token AS t2 FROM idem_claim('k-y', NULL, :'s') \gset
SELECT idem_complete('k-y', 200, '{}', :'s');
SELECT idem_fail('k-y', :'s');
SELECT idem_heartbeat('k-y', :'s');
SELECT idem_checkpoint('k-y', 'p', :'s');
SELECT idem_release('k-y', :'s');
SELECT idem_complete('k-none', 200, '{}', :'s', token => :t2);
-- release with the token: the next claim is new
SELECT idem_release('k-y', :'s', :t2);
SELECT outcome FROM idem_claim('k-y', NULL, :'s');
-- release without a token inside the claiming transaction
BEGIN;
SELECT outcome FROM idem_claim('k-z', NULL, :'s');
SELECT idem_checkpoint('k-z', 'half', :'s');
SELECT idem_heartbeat('k-z', :'s') IS NOT NULL AS heartbeat;
SELECT idem_release('k-z', :'s');
COMMIT;
SELECT count(*) AS rows_left FROM idem_lookup('k-z', :'s');

-- fail: retryable is taken over (reclaimed, larger token), not retryable is replayed
SELECT token AS t3 FROM idem_claim('k-f', '{"f": 1}', :'s') \gset
SELECT idem_fail('k-f', :'s', :t3, 503, '{"error": "timeout"}');
SELECT outcome, token <> :t3 AS new_token, status FROM idem_claim('k-f', '{"f": 1}', :'s') \gset r_
\echo :r_outcome :r_new_token :r_status
-- the old holder is fenced off: IK002 for every holder call
SELECT idem_complete('k-f', 200, '{}', :'s', token => :t3);
SELECT idem_fail('k-f', :'s', :t3);
SELECT idem_heartbeat('k-f', :'s', :t3);
SELECT idem_checkpoint('k-f', 'p', :'s', :t3);
SELECT idem_release('k-f', :'s', :t3);
SELECT status FROM idem_lookup('k-f', :'s');
BEGIN;
SELECT outcome FROM idem_claim('k-g', '{"g": 1}', :'s');
SELECT idem_fail('k-g', :'s', NULL, 402, '{"error": "card_declined"}', retryable => false);
COMMIT;
SELECT outcome, response_code, response FROM idem_claim('k-g', '{"g": 1}', :'s');

-- reclaimed after the lease ran out, with the recovery point; the old token is stale
SELECT token AS t4 FROM idem_claim('k-r', NULL, :'s', lease => '1 ms') \gset
SELECT idem_checkpoint('k-r', 'card-authorized', :'s', :t4);
SELECT pg_sleep(0.2);
SELECT outcome, token <> :t4 AS new_token, recovery_point FROM idem_claim('k-r', NULL, :'s');
SELECT idem_complete('k-r', 200, '{}', :'s', token => :t4);
-- stale: a run-out lease under stale_policy = 'hold' (a superuser setting,
-- set in a transaction: session settings do not reach delegated calls)
SELECT token AS t5 FROM idem_claim('k-s', NULL, :'s', lease => '1 ms') \gset
SELECT pg_sleep(0.2);
BEGIN;
SET LOCAL idempotency.stale_policy = 'hold';
SELECT outcome, token FROM idem_claim('k-s', NULL, :'s');
COMMIT;
-- an operator settles it: resolve 'fail' fences the holder off, the failure is replayed
SELECT idem_resolve('k-s', :'s', 'fail', 500, '{"error": "operator"}');
SELECT idem_complete('k-s', 200, '{}', :'s', token => :t5);
SELECT outcome, response_code, response FROM idem_claim('k-s', NULL, :'s');
SELECT idem_resolve('k-s', :'s', 'fail');
SELECT token AS t6 FROM idem_claim('k-t', NULL, :'s') \gset
SELECT idem_resolve('k-t', :'s', 'release');
SELECT count(*) AS rows_left FROM idem_lookup('k-t', :'s');
SELECT idem_release('k-t', :'s', :t6);
SELECT idem_resolve('k-none', :'s', 'release');

-- idem_lookup
SELECT scope = :'s' AS same_scope, key, status, response_code, response, token IS NOT NULL AS has_token
FROM idem_lookup('k-tx', :'s');
SELECT count(*) AS no_row FROM idem_lookup('k-none', :'s');

-- idem_execute: new runs the statement once and stores its row; replay runs nothing
SELECT outcome, response_code, response - 'id' AS response, response ? 'id' AS has_id
FROM idem_execute('k-e', '{"amount": 5}', :'s', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount',
    :'s', 'k-e', 5);
SELECT outcome, response_code, response - 'id' AS response
FROM idem_execute('k-e', '{"amount": 5}', :'s', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount',
    :'s', 'k-e', 5);
SELECT count(*) AS payments FROM payments WHERE merchant_id = :'s' AND key = 'k-e';
SELECT response AS stored FROM idem_lookup('k-e', :'s') \gset
SELECT :'stored'::jsonb = jsonb_build_object('id', id, 'amount', amount) AS stored_is_the_payment
FROM payments WHERE merchant_id = :'s' AND key = 'k-e';
SELECT outcome FROM idem_execute('k-e', '{"amount": 6}', :'s', 201, 'SELECT 1 AS one');
SELECT outcome FROM idem_execute('k-e2', NULL, :'s', 200, 'SET work_mem = ''1MB''');
-- in a transaction with the explicit calls, and new after a retryable failure
BEGIN;
SELECT outcome, response FROM idem_execute('k-e3', NULL, :'s', 200, 'SELECT $1::int AS n', 3);
SELECT outcome, response FROM idem_claim('k-e3', NULL, :'s');
COMMIT;
SELECT token AS t7 FROM idem_claim('k-e4', NULL, :'s') \gset
SELECT idem_fail('k-e4', :'s', :t7);
SELECT outcome, response FROM idem_execute('k-e4', NULL, :'s', 200, 'SELECT $1::text AS s', 'again');
SELECT outcome, response FROM idem_execute('k-e4', NULL, :'s', 200, 'SELECT $1::text AS s', 'again');

-- the rows the scope holds in the end
SELECT key, status, response_code, retryable FROM idempotency_keys WHERE scope = :'s' ORDER BY key;
