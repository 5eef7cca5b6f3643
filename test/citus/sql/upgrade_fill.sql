-- test/citus/sql/upgrade_fill.sql: keys in every state in scope :'s', made
-- by 0.2.0 before checks.sh's citus/upgrade: through the coordinator
-- (:coord; autocommit calls delegated to the worker that holds the scope,
-- the transaction block not), and on that worker (:shard).  Database :db.
\set ON_ERROR_STOP 1
\c :db postgres :host :coord
-- processing, the lease alive for an hour (its holder completes it after
-- the update with the token it has now)
SELECT outcome FROM idem_claim('live', '{"a": 1}', :'s', lease => '1 hour');
-- processing, the lease run out at once, with a recovery point
SELECT token AS ts FROM idem_claim('stale', NULL, :'s', lease => '1 ms') \gset
SELECT idem_checkpoint('stale', 'step-2', :'s', :ts);
BEGIN;
SELECT outcome FROM idem_claim('done', '{"amount": 300}', :'s');
SELECT idem_complete('done', 201, '{"payment_id": 7}', :'s');
SELECT outcome FROM idem_claim('declined', NULL, :'s');
SELECT idem_fail('declined', :'s', response_code => 402, response => '{"error": "card_declined"}', retryable => false);
COMMIT;
\c :db postgres :host :shard
BEGIN;
SELECT outcome FROM idem_claim('retry', NULL, :'s');
SELECT idem_fail('retry', :'s');
SELECT outcome FROM idem_claim('done-w', NULL, :'s');
SELECT idem_complete('done-w', 200, '{"on": "worker"}', :'s');
COMMIT;
