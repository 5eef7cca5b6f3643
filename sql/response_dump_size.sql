-- A stored response always fits a row pg_dump can write: its text form
-- must fit the 1 GB in which COPY writes a row, or one tenant's row would
-- break every tenant's backup.  Responses whose text would pass 256 MB are
-- refused (54000) where they are stored, counted without writing the text.
-- A numeric of a few bytes prints 131,072 digits, so 2,100 of them (about
-- 25 kB of jsonb) print 275 MB.
\set SHOW_CONTEXT never
SELECT pg_column_size(jsonb_agg('1e131071'::numeric)) < 100000 AS small_jsonb,
       length(jsonb_agg('1e131071'::numeric)::text) > 256 * 1024 * 1024 AS huge_text
FROM generate_series(1, 2100);
BEGIN;
SELECT outcome FROM idem_claim('big', NULL, 'attack');
SELECT idem_complete('big', 200, (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 2100)), 'attack');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT outcome FROM idem_claim('big', NULL, 'attack');
SELECT idem_fail('big', 'attack', NULL, 500, (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 2100)), false);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT outcome FROM idem_execute('big', NULL, 'attack', 200,
    'SELECT jsonb_agg(''1e131071''::numeric) AS a FROM generate_series(1, 2100)');
\echo :LAST_ERROR_SQLSTATE
-- a large response whose text is short enough is stored
BEGIN;
SELECT outcome FROM idem_claim('large', NULL, 'attack');
SELECT idem_complete('large', 200, (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 1000)), 'attack');
COMMIT;
SELECT count(*) AS stored, max(length(response::text)) > 100000000 AS text_over_100mb
FROM idempotency_keys WHERE scope = 'attack';
DELETE FROM idempotency_keys WHERE scope = 'attack';

-- the table refuses the same (its CHECK constraint), to a role that writes
-- it directly: a tenant holds UPDATE, since the functions run as the caller
-- (terse: the failing row's times differ from run to run)
\set VERBOSITY terse
SELECT outcome FROM idem_claim('direct', NULL, 'attack');
UPDATE idempotency_keys SET response = (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 2100))
WHERE scope = 'attack' AND key = 'direct';
\echo :LAST_ERROR_SQLSTATE
-- and a recovery point past 1 MB, through idem_checkpoint or directly
SELECT idem_checkpoint('direct', repeat('x', 1024 * 1024 + 1), 'attack',
                       (SELECT token FROM idempotency_keys WHERE scope = 'attack' AND key = 'direct'));
\echo :LAST_ERROR_SQLSTATE
UPDATE idempotency_keys SET recovery_point = repeat('x', 1024 * 1024 + 1)
WHERE scope = 'attack' AND key = 'direct';
\echo :LAST_ERROR_SQLSTATE
-- a request hash is 32 bytes (SHA-256): anything else is refused too
UPDATE idempotency_keys SET request_hash = convert_to(repeat('a', 100), 'UTF8')
WHERE scope = 'attack' AND key = 'direct';
\echo :LAST_ERROR_SQLSTATE
SELECT response IS NULL AND recovery_point IS NULL AS unchanged
FROM idempotency_keys WHERE scope = 'attack' AND key = 'direct';
-- exactly 1 MB is taken, both ways
SELECT idem_checkpoint('direct', repeat('x', 1024 * 1024), 'attack',
                       (SELECT token FROM idempotency_keys WHERE scope = 'attack' AND key = 'direct'));
UPDATE idempotency_keys SET recovery_point = repeat('y', 1024 * 1024)
WHERE scope = 'attack' AND key = 'direct';
SELECT octet_length(recovery_point) FROM idempotency_keys WHERE scope = 'attack' AND key = 'direct';
DELETE FROM idempotency_keys WHERE scope = 'attack';
\set VERBOSITY default
