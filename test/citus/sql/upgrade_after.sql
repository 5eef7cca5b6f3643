-- test/citus/sql/upgrade_after.sql: the keys upgrade_fill.sql made with
-- 0.2.0, used after ALTER EXTENSION idempotency UPDATE and one expiry pass
-- on each worker, through the coordinator (:coord), on :w1 (which holds
-- scope :'s1') and on :w2 (which holds :'s2').  :t1 and :t2: the tokens of
-- the live claims made before the update.  Database :db.  Compared with
-- expected/upgrade_after.out.
\set SHOW_CONTEXT never
\c :db postgres :host :coord
-- autocommit calls, delegated
SELECT outcome, response_code, response FROM idem_claim('done', '{"amount": 300}', :'s1');
SELECT outcome, response_code, response FROM idem_claim('declined', NULL, :'s2');
SELECT outcome FROM idem_claim('live', '{"a": 1}', :'s1');
SELECT idem_complete('live', 200, '{"after": 1}', :'s1', token => :t1);
SELECT outcome, response FROM idem_claim('live', '{"a": 1}', :'s1');
SELECT outcome, recovery_point FROM idem_claim('stale', NULL, :'s1');
SELECT outcome FROM idem_claim('retry', NULL, :'s1');
SELECT outcome, response - 'id' AS response FROM idem_execute('exec-c', NULL, :'s1', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount', :'s1', 'exec-c', 1);
-- a transaction block: runs on the coordinator
BEGIN;
SELECT outcome FROM idem_claim('new-c', NULL, :'s2');
INSERT INTO payments (merchant_id, key, amount) VALUES (:'s2', 'new-c', 2);
SELECT idem_complete('new-c', 201, '{"paid": 2}', :'s2');
COMMIT;
-- on the worker that holds :s2
\c :db postgres :host :w2
SELECT outcome FROM idem_claim('live', '{"a": 1}', :'s2');
SELECT idem_complete('live', 200, '{"after": 2}', :'s2', token => :t2);
SELECT outcome, recovery_point FROM idem_claim('stale', NULL, :'s2');
SELECT outcome FROM idem_claim('retry', NULL, :'s2');
SELECT outcome, response_code, response FROM idem_claim('done-w', NULL, :'s2');
SELECT outcome, response - 'id' AS response FROM idem_execute('exec-w', NULL, :'s2', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount', :'s2', 'exec-w', 3);
-- on the worker that holds :s1, with keys of both
\c :db postgres :host :w1
SELECT outcome, response FROM idem_claim('live', '{"a": 1}', :'s2');
SELECT outcome, response_code, response FROM idem_claim('declined', NULL, :'s1');
SELECT outcome, response_code, response FROM idem_claim('done-w', NULL, :'s1');
BEGIN;
SELECT outcome FROM idem_claim('new-w', NULL, :'s1');
SELECT idem_complete('new-w', 200, '{}', :'s1');
COMMIT;
SELECT outcome, response - 'id' AS response FROM idem_execute('exec-w', NULL, :'s1', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount', :'s1', 'exec-w', 4);
-- every key as the coordinator sees it: each payment once, no row due
-- at -infinity (the update's default) left
\c :db postgres :host :coord
SELECT scope = :'s1' AS s1, key, status, retryable, response_code, due_at > '-infinity' AS due_set,
       (SELECT count(*) FROM payments p WHERE p.merchant_id = k.scope AND p.key = k.key) AS payments
  FROM idempotency_keys k ORDER BY 1 DESC, 2;
SELECT idem_distribute(colocate_with => 'payments');
SELECT table_bytes > 0 AS table_bytes FROM idempotency_stats;
