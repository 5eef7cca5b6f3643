-- The SQL edition only: the commonest JSON request (every number an
-- integer below 10^33 with no display scale, no string holding the
-- stand-in "-0.0E-0") is hashed without idem_request_hash's call
-- (edition/fragments/request_hash_fast.sql) by idem_request_hash itself,
-- idem_claim's common call, idem_claim_batch and idem_execute; any other
-- by the call.  Every way must give the C build's hash
-- (test/edition/hash_corpus.sql compares idem_request_hash with it): here
-- each way's stored or compared hash against idem_request_hash, and the
-- hashes of requests at the way's edges against their canonical text
-- written by hand; and a request whose numbers print long (display scale)
-- costs each way time in proportion to its size.
\set VERBOSITY terse
CREATE TEMP TABLE docs (n int, doc jsonb, canonical text);
INSERT INTO docs VALUES
    (1, '{"amount": 3000, "currency": "TWD", "order_id": "k-1"}', '{"amount":3000,"currency":"TWD","order_id":"k-1"}'),
    (2, '[999999999999999999999999999999999, -999999999999999999999999999999999]',
        '[999999999999999999999999999999999,-999999999999999999999999999999999]'),
    (3, '[1000000000000000000000000000000000]', '[1e33]'),
    (4, '{"a": -1e33, "b": 2}', '{"a":-1e33,"b":2}'),
    (5, '[1e40, 0, -0, 1E+2]', '[1e40,0,0,100]'),
    (6, '{"k": null, "s": "a\": null", "t": "-0E-0"}', '{"k":null,"s":"a\": null","t":"-0E-0"}'),
    (7, '{"note": "1.50", "n": 1}', '{"n":1,"note":"1.50"}'),
    (8, '{"amount": 12.50, "z": [1.0, 2]}', '{"z":[1,2],"amount":12.5}'),
    (9, '"just a string"', '"just a string"'),
    (10, '[[[{"x": [1, {"y": 10000000000000000000000000000000000}]}]]]', '[[[{"x":[1,{"y":1e34}]}]]]'),
    (11, '{"é": "\u00e9😀", "tab": "\t", "e": {}}', '{"e":{},"é":"é😀","tab":"\t"}'),
    (12, 'null', 'null'),
    (13, '{"s": "-0.0E-0", "n": 1}', '{"n":1,"s":"-0.0E-0"}'),
    (14, '[3000.0, 0e-16383, 1e-40]', '[3000,0,1e-40]'),
    (15, '{"email": "a.b@example.com", "amount": 1999}', '{"email":"a.b@example.com","amount":1999}');
-- which way each takes: the fragment's or the call's
SELECT n, pg_column_size(doc) <= 8192 AND ROW(jsonb_path_query_array(doc, 'strict $.** ? (@.type() == "number")'))::record
          *= ROW(jsonb_path_query_array(doc, 'strict $.** ? (@.type() == "number" && @.abs() < 1e33).floor()'))::record
          AND strpos(doc::text, '-0.0E-0') = 0 AS without_the_call,
       idem_request_hash(doc) = sha256(convert_to(canonical, getdatabaseencoding())) AS canonical_hash
  FROM docs ORDER BY n;

BEGIN;
-- idem_claim's common call (one query), then a lease given (the other
-- way); the first completed and claimed again: a replay, its hash compared
SELECT n, c.outcome FROM docs, LATERAL idem_claim('common/' || n, doc, 'hash_paths') AS c ORDER BY n;
SELECT n, c.outcome FROM docs, LATERAL idem_claim('lease/' || n, doc, 'hash_paths', lease => '60 s') AS c ORDER BY n;
SELECT count(idem_complete('common/' || n, 201, '{"ok": true}', 'hash_paths')) AS completed FROM docs;
SELECT n, c.outcome FROM docs, LATERAL idem_claim('common/' || n, doc, 'hash_paths') AS c ORDER BY n;
SELECT split_part(b.key, '/', 2)::int AS n, b.outcome
  FROM idem_claim_batch((SELECT array_agg('batch/' || n ORDER BY n) FROM docs),
                        (SELECT array_agg(doc ORDER BY n) FROM docs), 'hash_paths') AS b ORDER BY 1;
-- idem_execute: a new key, then its replay
SELECT n, e.outcome FROM docs, LATERAL idem_execute('execute/' || n, doc, 'hash_paths', 201, 'SELECT $1::int AS n', n) AS e ORDER BY n;
SELECT n, e.outcome FROM docs, LATERAL idem_execute('execute/' || n, doc, 'hash_paths', 201, 'SELECT $1::int AS n', n) AS e ORDER BY n;
-- every way stored idem_request_hash's hash
SELECT split_part(k.key, '/', 1) AS way, count(*) AS keys,
       count(*) FILTER (WHERE k.request_hash = idem_request_hash(d.doc)) AS same_hash
  FROM idempotency_keys k JOIN docs d ON d.n = split_part(k.key, '/', 2)::int
 WHERE k.scope = 'hash_paths' GROUP BY 1 ORDER BY 1;
-- another request under a completed key is told apart, on each way
SAVEPOINT s;
SELECT (idem_claim('common/1', '{"amount": 3001, "currency": "TWD", "order_id": "k-1"}', 'hash_paths')).outcome;
ROLLBACK TO s;
SELECT (idem_execute('execute/1', '{"amount": 3001, "currency": "TWD", "order_id": "k-1"}', 'hash_paths', 201, 'SELECT 1 AS n')).outcome;
ROLLBACK TO s;
-- and the same request written otherwise replays
SELECT (idem_claim('common/8', '{"z": [1, 2.0], "amount": 12.5}', 'hash_paths')).outcome;
ROLLBACK;


-- numbers that print long: 8,200 of 0e-16383 (16,385 characters each as
-- jsonb prints them, 134 MB in all) in a 74 kB request, each way (the
-- call's); 600 of them (10 MB) in a request of less than 8192 bytes, which
-- the fragment's test takes and refuses
SELECT pg_column_size(x) <= 8192 AS short,
       idem_request_hash(x) = sha256(convert_to('[' || repeat('0,', 600) || '1]', getdatabaseencoding())) AS canonical_hash
  FROM (SELECT ('[' || repeat('0e-16383,', 600) || '1]')::jsonb) AS t(x);
SELECT length(idem_request_hash(('[' || repeat('0e-16383,', 8200) || '1]')::jsonb)) AS bytes;
BEGIN;
SELECT (idem_claim('long', ('[' || repeat('0e-16383,', 8200) || '1]')::jsonb, 'hash_paths')).outcome;
SELECT outcome FROM idem_claim_batch(ARRAY['long/batch'], ARRAY[('[' || repeat('0e-16383,', 8200) || '1]')::jsonb], 'hash_paths');
SELECT (idem_execute('long/execute', ('[' || repeat('0e-16383,', 8200) || '1]')::jsonb, 'hash_paths', 201, 'SELECT 1 AS n')).outcome;
SELECT (idem_claim('short', ('[' || repeat('0e-16383,', 600) || '1]')::jsonb, 'hash_paths')).outcome;
SELECT count(*) FILTER (WHERE request_hash = idem_request_hash(('[' || repeat('0e-16383,', 8200) || '1]')::jsonb)) AS same_hash,
       count(*) FILTER (WHERE request_hash = sha256(convert_to('[' || repeat('0,', 600) || '1]', getdatabaseencoding()))) AS short_canonical
  FROM idempotency_keys WHERE scope = 'hash_paths';
ROLLBACK;

-- the walk (a number outside 10^-32..10^33) copies each container it
-- enters: 5,000 levels of objects around 1e100 hash as the canonical text
-- written by hand; 3,000 levels around 1e100 and a string of 100 kB would
-- copy 300 MB (time in the product of depth and size): refused, 54000,
-- past 64 times its size and 256 MB
\set VERBOSITY terse
SELECT idem_request_hash((repeat('{"a": ', 5000) || '1e100' || repeat('}', 5000))::jsonb)
       = sha256(convert_to(repeat('{"a":', 5000) || '1e100' || repeat('}', 5000), getdatabaseencoding())) AS deep_hashed;
SELECT idem_request_hash((repeat('[', 3000) || '1e100, "' || repeat('x', 100000) || '"' || repeat(']', 3000))::jsonb);

-- at most 16 MB as jsonb (2^24 bytes, uncompressed; the walk, 4 MB): the
-- ways hold arrays of a document's items, 100 bytes an item and more
-- (past 2^24 items, jsonpath fails: XX000); a request of 2^24 bytes is
-- hashed as the canonical text written by hand, one byte more refused,
-- 54000, given, read compressed from a table or stored out of line (whose
-- size pg_column_size gives without its header), by each function that
-- hashes; the walk's (a number outside 10^-32..10^33) at 2^22 bytes and
-- one more
SELECT pg_column_size(r) AS bytes,
       idem_request_hash(r) = sha256(convert_to('["' || repeat('x', 16777204) || '"]', getdatabaseencoding())) AS hashed
  FROM (SELECT jsonb_build_array(repeat('x', 16777204))) AS t(r);
SELECT idem_request_hash(jsonb_build_array(repeat('x', 16777205)));
SELECT pg_column_size(r) AS bytes,
       idem_request_hash(r) = sha256(convert_to('[1e40,"' || repeat('x', 4194280) || '"]', getdatabaseencoding())) AS walked
  FROM (SELECT jsonb_build_array(1e40, repeat('x', 4194280))) AS t(r);
SELECT idem_request_hash(jsonb_build_array(1e40, repeat('x', 4194281)));
SELECT idem_hash_canonical(jsonb_build_array(repeat('x', 4194293)));   -- the walk's own entry
CREATE TEMP TABLE large_request AS SELECT jsonb_build_object('a', repeat('x', 16777216), 'n', 1) AS r;
SELECT pg_column_compression(r) IS NOT NULL AS compressed, pg_column_size(r) < 1048576 AS small_stored FROM large_request;
SELECT idem_request_hash(r) FROM large_request;
SELECT (idem_claim('large', r, 'hash_paths')).outcome FROM large_request;
CREATE TEMP TABLE external_request (n integer, r jsonb);
ALTER TABLE external_request ALTER r SET STORAGE EXTERNAL;
INSERT INTO external_request SELECT n, jsonb_build_array(repeat('x', n)) FROM (VALUES (16777204), (16777205)) AS t(n);
SELECT n, pg_column_size(r) AS stored, pg_column_compression(r) IS NOT NULL AS compressed FROM external_request ORDER BY n;
SELECT length(idem_request_hash(r)) AS bytes FROM external_request WHERE n = 16777204;
SELECT idem_request_hash(r) FROM external_request WHERE n = 16777205;
DROP TABLE large_request, external_request;
