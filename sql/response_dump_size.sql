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

-- Both builds take the same responses, so that a dump of either restores
-- into the other (one row the target's CHECK refused would fail the COPY
-- of the whole table): over 8 kB uncompressed, a response holding an item
-- below 16 levels of containers is refused, and so is one over 64 MB.
CREATE FUNCTION pg_temp.nested(levels int, inner_bytes int) RETURNS jsonb
LANGUAGE sql AS $$
SELECT (repeat('[', levels) || to_jsonb(repeat('x', inner_bytes))::text || repeat(']', levels))::jsonb
$$;
SELECT pg_column_size(pg_temp.nested(16, 9000)) > 8192 AS over_8kb,
       jsonb_path_exists(pg_temp.nested(16, 9000), 'strict $.**{16}') AS level_16,
       jsonb_path_exists(pg_temp.nested(16, 9000), 'strict $.**{17}') AS level_17;
SELECT idem_row_storable(pg_temp.nested(16, 9000), NULL, NULL) AS at_16,
       idem_row_storable(pg_temp.nested(17, 9000), NULL, NULL) AS at_17,
       idem_row_storable(pg_temp.nested(17, 8000), NULL, NULL) AS at_17_within_8kb,
       idem_row_storable(pg_temp.nested(12000, 9000), NULL, NULL) AS at_12000,
       idem_row_storable((repeat('{"a": ', 20) || to_jsonb(repeat('x', 9000))::text || repeat('}', 20))::jsonb,
                         NULL, NULL) AS objects_at_20,
       idem_row_storable(to_jsonb(repeat('x', 9000)), NULL, NULL) AS scalar;
-- a response read back compressed (a value from a table) is judged by its
-- size uncompressed: 3 kB nested 20 deep is taken
CREATE TEMP TABLE compressed (j jsonb);
INSERT INTO compressed SELECT pg_temp.nested(20, 3000) || jsonb_build_array(repeat('y', 3000));
SELECT pg_column_compression(j) IS NOT NULL AS is_compressed, idem_row_storable(j, NULL, NULL) AS taken
FROM compressed;
-- and one stored out of line uncompressed, whose size PostgreSQL reports
-- without its 4-byte header: by its size with it, 8194 bytes, not taken
CREATE TEMP TABLE out_of_line (r jsonb);
ALTER TABLE out_of_line ALTER r SET STORAGE EXTERNAL;
INSERT INTO out_of_line
SELECT (repeat('[', 17) || to_jsonb(left(string_agg(md5(g::text), ''), 8054))::text || repeat(']', 17))::jsonb
  FROM generate_series(1, 252) g;
SELECT pg_column_size(r) AS reported, idem_row_storable(r, NULL, NULL) AS taken FROM out_of_line;
-- and so the functions refuse them (54000), and the table (23514)
BEGIN;
SELECT outcome FROM idem_claim('deep', NULL, 'attack');
SELECT idem_complete('deep', 200, pg_temp.nested(17, 9000), 'attack');
ROLLBACK;
SELECT outcome FROM idem_claim('deep', NULL, 'attack');
\set VERBOSITY terse
UPDATE idempotency_keys SET response = pg_temp.nested(12000, 9000)
WHERE scope = 'attack' AND key = 'deep';
\echo :LAST_ERROR_SQLSTATE
UPDATE idempotency_keys SET response = (SELECT r FROM out_of_line)
WHERE scope = 'attack' AND key = 'deep';
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
-- over 64 MB as jsonb, though its text is far within 256 MB: refused
SELECT idem_row_storable(to_jsonb(repeat('z', 64 * 1024 * 1024)), NULL, NULL) AS at_64mb_string,
       idem_row_storable(jsonb_build_array(repeat('z', 64 * 1024 * 1024 - 64)), NULL, NULL) AS just_within;
-- the response of a key made final by the attempts limit carries the last
-- response one level down: left out when that puts an item at level 17
BEGIN;
SELECT outcome FROM idem_claim('tries', NULL, 'attack');
SELECT idem_fail('tries', 'attack', NULL, 502, pg_temp.nested(16, 9000), true);
COMMIT;
SELECT outcome, status, jsonb_typeof(response->'last_response') AS last_response, response->>'last_response_omitted' AS why
FROM idem_claim('tries', NULL, 'attack', max_attempts => 1);
DELETE FROM idempotency_keys WHERE scope = 'attack';
