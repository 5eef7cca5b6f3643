-- test/citus/sql/mixed.sql: the same keys used from every node in turn:
-- :coord (the coordinator; autocommit calls delegated), :shard (the worker
-- that holds scope :'s'), :other (the other worker), with the functions
-- distributed.  Compared with expected/mixed.out (a single server given the
-- same port three times answers it).
\set SHOW_CONTEXT never
\c postgres postgres :host :coord
SELECT token AS t1 FROM idem_claim('m-1', '{"a": 1}', :'s', lease => '30 s') \gset
\c postgres postgres :host :shard
SELECT idem_heartbeat('m-1', :'s', :t1) IS NOT NULL AS heartbeat;
SELECT outcome, token FROM idem_claim('m-1', '{"a": 1}', :'s', wait => false);
\c postgres postgres :host :other
SELECT idem_checkpoint('m-1', 'step-1', :'s', :t1);
SELECT outcome FROM idem_claim('m-1', '{"a": 2}', :'s');
\c postgres postgres :host :coord
BEGIN;
SELECT recovery_point FROM idem_lookup('m-1', :'s');
INSERT INTO payments (merchant_id, key, amount) VALUES (:'s', 'm-1', 1);
SELECT idem_complete('m-1', 201, '{"paid": 1}', :'s', token => :t1);
COMMIT;
\c postgres postgres :host :other
SELECT outcome, response_code, response FROM idem_claim('m-1', '{"a": 1}', :'s');
\c postgres postgres :host :shard
SELECT outcome, response_code, response FROM idem_claim('m-1', '{"a": 1}', :'s');

-- a claim taken over on another node fences the first holder off everywhere
\c postgres postgres :host :other
SELECT token AS t2 FROM idem_claim('m-2', NULL, :'s', lease => '1 ms') \gset
SELECT pg_sleep(0.2);
\c postgres postgres :host :coord
SELECT outcome, token AS t3 FROM idem_claim('m-2', NULL, :'s', lease => '30 s') \gset
\echo :outcome
\c postgres postgres :host :shard
SELECT :t3 <> :t2 AS new_token;
SELECT idem_complete('m-2', 200, '{}', :'s', token => :t2);
SELECT idem_heartbeat('m-2', :'s', :t2);
\c postgres postgres :host :other
SELECT idem_checkpoint('m-2', 'x', :'s', :t2);
SELECT idem_fail('m-2', :'s', :t2);
\c postgres postgres :host :coord
BEGIN;
SELECT idem_release('m-2', :'s', :t2);
ROLLBACK;
SELECT idem_release('m-2', :'s', :t2);
\c postgres postgres :host :shard
SELECT status, recovery_point FROM idem_lookup('m-2', :'s');
SELECT idem_fail('m-2', :'s', :t3, 503, '{"e": 1}');
\c postgres postgres :host :other
SELECT outcome, token AS t4 FROM idem_claim('m-2', NULL, :'s') \gset
\echo :outcome
\c postgres postgres :host :coord
SELECT idem_complete('m-2', 200, '{}', :'s', token => :t3);
SELECT idem_release('m-2', :'s', :t4);
SELECT outcome FROM idem_claim('m-2', NULL, :'s', lease => '30 s');

-- idem_execute on one node, replays everywhere
\c postgres postgres :host :shard
SELECT outcome, response - 'id' AS response FROM idem_execute('m-3', NULL, :'s', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount', :'s', 'm-3', 3);
\c postgres postgres :host :coord
SELECT outcome, response - 'id' AS response FROM idem_execute('m-3', NULL, :'s', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount', :'s', 'm-3', 3);
BEGIN;
SELECT outcome, response - 'id' AS response FROM idem_execute('m-3', NULL, :'s', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount', :'s', 'm-3', 3);
COMMIT;
\c postgres postgres :host :other
SELECT outcome, response - 'id' AS response FROM idem_claim('m-3', NULL, :'s');
SELECT count(*) AS payments FROM payments WHERE merchant_id = :'s' AND key = 'm-3';
SELECT key, status, response_code FROM idempotency_keys WHERE scope = :'s' ORDER BY key;
