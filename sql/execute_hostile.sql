-- idem_execute against hostile statements (issue 10): none of these may
-- crash the server, store anything but what to_jsonb makes, or run a kind of
-- statement other than SELECT, INSERT, UPDATE, DELETE.  A crash ends this
-- file early (psql loses its connection), so the expected output pins it.
\set SHOW_CONTEXT never
SELECT pg_backend_pid() AS pid \gset

-- A statement that calls idem_execute with more distinct statements than
-- the backend caches: the outer statement's entry is pinned while it runs.
SELECT outcome, response FROM idem_execute('outer', NULL, 'hostile', 200,
  'SELECT count(*) AS n FROM (SELECT (idem_execute(''in-'' || g, NULL, ''hostile'', 200, ''SELECT '' || g || '' AS v'')).outcome FROM generate_series(1, 40) g) s');
SELECT count(*) AS inner_keys, count(*) FILTER (WHERE response = jsonb_build_object('v', substr(key, 4)::int)) AS own_response
FROM idempotency_keys WHERE scope = 'hostile' AND key LIKE 'in-%';
-- nested through the general way (rows exist: all replay), and twice the same text
SELECT outcome, response FROM idem_execute('outer2', NULL, 'hostile', 200,
  'SELECT string_agg(o, '','') AS o FROM (SELECT (idem_execute(''in-'' || g, NULL, ''hostile'', 200, ''SELECT '' || g || '' AS v'')).outcome AS o FROM generate_series(1, 20) g) s');
SELECT outcome, response FROM idem_execute('self', NULL, 'hostile', 200,
  'SELECT (idem_execute(''self-inner'', NULL, ''hostile'', 200, ''SELECT 1 AS one'')).response AS r');

-- EXECUTE of a prepared statement is refused, whatever the statement is:
-- its result's shape could change under the same text
PREPARE p AS DELETE FROM idempotency_keys WHERE false;
SELECT outcome FROM idem_execute('k1', NULL, 'hostile', 200, 'EXECUTE p');
\echo :LAST_ERROR_SQLSTATE
DEALLOCATE p;
PREPARE p AS SELECT '\x1000ff40'::bytea AS b;
SELECT outcome FROM idem_execute('k2', NULL, 'hostile', 200, 'EXECUTE p');
\echo :LAST_ERROR_SQLSTATE
DEALLOCATE p;
SELECT count(*) AS stored FROM idempotency_keys WHERE scope = 'hostile' AND key IN ('k1', 'k2');

-- the response is to_jsonb of the row the statement returned, whatever its
-- types: bytea becomes a JSON string
SELECT outcome, response FROM idem_execute('k3', NULL, 'hostile', 200, 'SELECT ''\x1000ff40''::bytea AS b');
SELECT response = to_jsonb(r) AS as_to_jsonb FROM idem_lookup('k3', 'hostile'), (SELECT '\x1000ff40'::bytea AS b) r;
-- a table whose columns change between two calls of the same text
CREATE TABLE shape (a int);
INSERT INTO shape VALUES (1);
SELECT outcome, response FROM idem_execute('k4', NULL, 'hostile', 200, 'SELECT * FROM shape');
ALTER TABLE shape ADD COLUMN b bytea DEFAULT '\xff00';
SELECT outcome, response FROM idem_execute('k5', NULL, 'hostile', 200, 'SELECT * FROM shape');
ALTER TABLE shape DROP COLUMN a;
SELECT outcome, response FROM idem_execute('k6', NULL, 'hostile', 200, 'SELECT * FROM shape');
DROP TABLE shape;
-- no columns at all
SELECT outcome, response FROM idem_execute('k7', NULL, 'hostile', 200, 'SELECT');
-- a trailing comment
SELECT outcome, response FROM idem_execute('k8', NULL, 'hostile', 200, 'SELECT 8 AS n -- the answer');
-- every stored response can be read back and dumped as text
SELECT count(*) AS rows, count(response::text) AS readable FROM idempotency_keys WHERE scope = 'hostile';

-- only SELECT, INSERT, UPDATE and DELETE: everything else is refused by its
-- parse tree with 0A000, before anything is claimed or run
CREATE TABLE hostile_log (s text);
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'SET search_path = nowhere');
\echo :LAST_ERROR_SQLSTATE
SHOW search_path;
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'CREATE TABLE made_by_execute (a int)');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'DO $$ BEGIN INSERT INTO hostile_log VALUES (''do''); END $$');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'NOTIFY hostile');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'PREPARE q AS SELECT 1');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'SELECT 1 AS a INTO made_by_execute');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'SELECT 1 AS a INTO made_by_execute UNION SELECT 2');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'COMMIT');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'ROLLBACK');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'MERGE INTO hostile_log USING (SELECT 1) s ON false WHEN NOT MATCHED THEN INSERT VALUES (''merge'')');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'EXPLAIN ANALYZE INSERT INTO hostile_log VALUES (''explain'')');
\echo :LAST_ERROR_SQLSTATE
-- after a comment that a carriage return ends, as PostgreSQL's scanner ends it
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, E'-- note\rSHOW work_mem');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, E'/* a */ --\rEXPLAIN SELECT 1');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, 'COPY hostile_log TO STDOUT');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('kind', NULL, 'hostile', 200, ';');
\echo :LAST_ERROR_SQLSTATE
SELECT to_regclass('made_by_execute') AS made, (SELECT count(*) FROM hostile_log) AS logged,
       (SELECT count(*) FROM idempotency_keys WHERE scope = 'hostile' AND key = 'kind') AS claimed;
-- refused on replay too: the statement is checked before the claim
SELECT outcome FROM idem_execute('k8', NULL, 'hostile', 200, 'NOTIFY hostile');
\echo :LAST_ERROR_SQLSTATE

-- a statement that deletes or changes its own key's row: IK004 / IK003,
-- not an internal error (the general way: the key has a row to take over)
BEGIN;
SELECT outcome FROM idem_claim('own', NULL, 'hostile');
SELECT idem_fail('own', 'hostile');
COMMIT;
SELECT outcome FROM idem_execute('own', NULL, 'hostile', 200, 'DELETE FROM idempotency_keys WHERE scope = ''hostile'' AND key = ''own''');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_execute('own', NULL, 'hostile', 200, 'UPDATE idempotency_keys SET status = ''completed'' WHERE scope = ''hostile'' AND key = ''own''');
\echo :LAST_ERROR_SQLSTATE
SELECT status, retryable FROM idem_lookup('own', 'hostile');

-- still the same backend: nothing above crashed it
SELECT pg_backend_pid() = :pid AS same_backend;
DROP TABLE hostile_log;
