-- idem_execute: claim, run the caller's statement, record its result, in one call.
\set SHOW_CONTEXT never
CREATE TABLE exec_payments (id serial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL);

-- new: the statement runs once; its RETURNING row is the response, stored completed
SELECT outcome, token > 0 AS has_token, status, response_code, response
FROM idem_execute('x1', '{"order": "A1", "amount": 300}', 'exec', 201,
                  'INSERT INTO exec_payments (order_id, amount) VALUES ($1, $2) RETURNING id, amount',
                  'A1', 300);
SELECT status, response_code, response, locked_until, token IS NOT NULL AS has_token
FROM idempotency_keys WHERE scope = 'exec' AND key = 'x1';
-- replay: nothing runs, the stored response comes back
SELECT outcome, token, status, response_code, response
FROM idem_execute('x1', '{"amount": 300, "order": "A1"}', 'exec', 201,
                  'INSERT INTO exec_payments (order_id, amount) VALUES ($1, $2) RETURNING id, amount',
                  'A1', 300);
SELECT count(*) AS payments FROM exec_payments;
-- idem_claim sees the same key and response
SELECT outcome, response FROM idem_claim('x1', '{"order": "A1", "amount": 300}', 'exec');
-- a different request is refused before anything runs
SELECT * FROM idem_execute('x1', '{"order": "A1", "amount": 301}', 'exec', 201,
                           'INSERT INTO exec_payments (order_id, amount) VALUES ($1, $2) RETURNING id',
                           'A1', 301);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS payments FROM exec_payments;

-- a statement that fails takes the claim with it: the retry is new
SELECT * FROM idem_execute('x2', NULL, 'exec', 201,
                           'INSERT INTO exec_payments (order_id, amount) VALUES ($1, $2) RETURNING id',
                           'A2', NULL::int);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM idem_lookup('x2', 'exec');
SELECT outcome, response ->> 'amount' AS amount
FROM idem_execute('x2', NULL, 'exec', 201,
                  'INSERT INTO exec_payments (order_id, amount) VALUES ($1, $2) RETURNING amount',
                  'A2', 5);

-- statements without result rows store no response; one without arguments
SELECT outcome, status, response_code, response
FROM idem_execute('x3', NULL, 'exec', 204, 'UPDATE exec_payments SET amount = amount + 1 WHERE order_id = $1', 'A2');
SELECT outcome, response FROM idem_execute('x4', NULL, 'exec', 200, 'SELECT count(*) AS n FROM exec_payments;');
-- arguments: typed, untyped literals (text), NULL, an explicit VARIADIC array
SELECT outcome, response FROM idem_execute('x5', NULL, 'exec', 200, 'SELECT $1::int + $2 AS s, $3 AS t, $4::text IS NULL AS n', 2, 40, 'lit', NULL);
SELECT outcome, response FROM idem_execute('x6', NULL, 'exec', 200, 'SELECT $1 || $2 AS s', VARIADIC ARRAY['a', 'b']);

-- more than one row, several statements, no statement
SELECT * FROM idem_execute('x7', NULL, 'exec', 200, 'SELECT generate_series(1, 2)');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_execute('x7', NULL, 'exec', 200, 'SELECT 1; SELECT 2');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_execute('x7', NULL, 'exec', 200, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_execute('x7', NULL, 'exec', 200, 'SELEC 1');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM idem_lookup('x7', 'exec');

-- in_progress: a committed claim holds the key; the statement does not run
SELECT outcome FROM idem_claim('x8', NULL, 'exec');
SELECT outcome, status FROM idem_execute('x8', NULL, 'exec', 201, 'INSERT INTO exec_payments (order_id, amount) VALUES ($1, 1)', 'A8');
-- reclaimed: a retryable failure is taken over, run and completed
BEGIN;
SELECT outcome FROM idem_claim('x9', NULL, 'exec');
SELECT idem_fail('x9', 'exec');
COMMIT;
SELECT outcome, status, response_code, response ->> 'order_id' AS order_id
FROM idem_execute('x9', NULL, 'exec', 201, 'INSERT INTO exec_payments (order_id, amount) VALUES ($1, 1) RETURNING order_id', 'A9');
SELECT status, response_code FROM idempotency_keys WHERE scope = 'exec' AND key = 'x9';

-- the statement resolves names with the caller's search_path
CREATE SCHEMA shop;
CREATE TABLE shop.orders (id int);
SET search_path = shop, public;
SELECT outcome, response FROM idem_execute('x10', NULL, 'exec', 201, 'INSERT INTO orders VALUES (7) RETURNING id');
RESET search_path;
SELECT * FROM shop.orders;

-- it runs as the caller: a role without rights on the table cannot use it to write there
CREATE ROLE exec_app IN ROLE idempotency_app;
SET ROLE exec_app;
SELECT * FROM idem_execute('x11', NULL, 'exec', 201, 'INSERT INTO exec_payments (order_id, amount) VALUES ($1, 1)', 'A11');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE exec_app;
SELECT count(*) FROM idem_lookup('x11', 'exec');

-- read-only transactions refuse it
BEGIN READ ONLY;
SELECT * FROM idem_execute('x12', NULL, 'exec', 200, 'SELECT 1');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- A key without a row is written once, completed, after the statement ran
-- in a subtransaction.  The statement's error is the caller's error, with
-- its SQLSTATE, and leaves neither key nor work behind.
SELECT * FROM idem_execute('x13', NULL, 'exec', 201, 'INSERT INTO exec_payments (order_id, amount) VALUES ($1, 1 / 0) RETURNING id', 'A13');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS key_rows FROM idempotency_keys WHERE scope = 'exec' AND key = 'x13';
-- a unique violation that is not about the key: the caller's error too
CREATE TABLE exec_unique (order_id text PRIMARY KEY);
INSERT INTO exec_unique VALUES ('U1');
SELECT * FROM idem_execute('x14', NULL, 'exec', 201, 'INSERT INTO exec_unique VALUES ($1) RETURNING order_id', 'U1');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS key_rows FROM idempotency_keys WHERE scope = 'exec' AND key = 'x14';
-- rolling back to a savepoint takes the key and the work back
BEGIN;
SAVEPOINT before;
SELECT outcome FROM idem_execute('x15', NULL, 'exec', 201, 'INSERT INTO exec_unique VALUES ($1) RETURNING order_id', 'U15');
ROLLBACK TO SAVEPOINT before;
SELECT count(*) AS key_rows FROM idempotency_keys WHERE scope = 'exec' AND key = 'x15';
SELECT count(*) AS work FROM exec_unique WHERE order_id = 'U15';
COMMIT;
-- many new keys in one transaction: past the 32 subtransactions the short
-- way may use per transaction, the general way (claim, statement,
-- complete) takes over; every key is new, paid once and completed
BEGIN;
SELECT outcome, count(*) FROM (
    SELECT (idem_execute('many' || i, jsonb_build_object('i', i), 'exec-many', 201,
                         'INSERT INTO exec_unique VALUES ($1) RETURNING order_id', 'M' || i)).outcome
    FROM generate_series(1, 100) i) s
GROUP BY outcome;
COMMIT;
-- (a row written the short way has updated_at = created_at)
SELECT status, count(*), count(*) FILTER (WHERE response ->> 'order_id' = 'M' || substr(key, 5)) AS own_response,
       count(*) FILTER (WHERE updated_at = created_at) AS written_once
FROM idempotency_keys WHERE scope = 'exec-many' GROUP BY status;
SELECT count(*) AS payments FROM exec_unique WHERE order_id LIKE 'M%';
-- and all of them replay
SELECT outcome, count(*) FROM (
    SELECT (idem_execute('many' || i, jsonb_build_object('i', i), 'exec-many', 201,
                         'INSERT INTO exec_unique VALUES ($1) RETURNING order_id', 'M' || i)).outcome
    FROM generate_series(1, 100) i) s
GROUP BY outcome;
DROP TABLE exec_unique;
-- The statements idem_execute keeps for this backend are in a context of
-- their own, named in pg_backend_memory_contexts
SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'idempotency cache';
