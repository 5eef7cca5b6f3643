-- idem_request_hash: canonical JSON, and the bytea/text variants.

-- SHA-256 of the bytes given
SELECT encode(idem_request_hash('abc'::text), 'hex');
SELECT idem_request_hash('abc'::bytea) = sha256('abc'::bytea) AS bytea_is_sha256;

-- jsonb: SHA-256 of the canonical text (compact, jsonb key order, normalized numbers)
SELECT idem_request_hash('{"b": [1, 2.50, {"y": null, "x": true}], "a": "é"}'::jsonb)
     = sha256(convert_to('{"a":"é","b":[1,2.5,{"x":true,"y":null}]}', 'UTF8')) AS canonical;

-- equal documents hash equal
SELECT idem_request_hash(a::jsonb) = idem_request_hash(b::jsonb) AS equal, a, b
FROM (VALUES ('{"a":1,"b":2}', '{"b":2,"a":1}'),
             ('{"a":1}', '{ "a" :  1 }'),
             ('{"n":1.0}', '{"n":1}'),
             ('{"n":1e2}', '{"n":100}'),
             ('{"n":-0}', '{"n":0}'),
             ('{"a":1,"a":2}', '{"a":2}'),
             ('"caf\u00e9"', '"café"'),
             ('[1,2]', '[2,1]'),
             ('{"a":"1"}', '{"a":1}'),
             ('{"a":null}', '{}'),
             ('[]', '{}'),
             ('null', '"null"'),
             ('{"a":[1]}', '{"a":1}')) AS t(a, b);

-- scalars, nested and empty documents all hash to 32 bytes
SELECT j, length(idem_request_hash(j::jsonb)) AS bytes
FROM (VALUES ('null'), ('true'), ('0'), ('"s"'), ('[]'), ('{}'), ('{"a":{"b":{"c":[[],[{}]]}}}')) AS t(j);

-- strings are escaped as JSON, so no two documents share a canonical text
SELECT idem_request_hash('["a,b"]'::jsonb) <> idem_request_hash('["a","b"]'::jsonb) AS comma_escaped,
       idem_request_hash('{"a":"b\":\"c"}'::jsonb) <> idem_request_hash('{"a":"b","c":1}'::jsonb) AS quote_escaped;

-- STRICT: NULL in, NULL out
SELECT idem_request_hash(NULL::jsonb) IS NULL AS null_jsonb, idem_request_hash(NULL::text) IS NULL AS null_text;

-- what idem_claim stores is this hash
SELECT outcome FROM idem_claim('h1', '{"z": 1, "a": [true]}', 'hash');
SELECT request_hash = idem_request_hash('{"a":[true],"z":1}'::jsonb) AS stored
FROM idempotency_keys WHERE scope = 'hash' AND key = 'h1';

-- numbers: numeric_normalize's form from 10^-32 to 10^32, every digit kept
SELECT j, idem_request_hash(j::jsonb) = sha256(convert_to(c, 'UTF8')) AS canonical
FROM (VALUES ('[0, -0.0, 1, -1, 10, 100, 10000, 123456789, 3000, 1.50, -2.5, 0.5, 0.05, 0.0001, 0.00012, 12345.678900]',
              '[0,0,1,-1,10,100,10000,123456789,3000,1.5,-2.5,0.5,0.05,0.0001,0.00012,12345.6789]'),
             ('[1e32, 9.99e32, 1e-32, -1.5e-32, 123456789012345678901234567890123]',
              '[100000000000000000000000000000000,999000000000000000000000000000000,0.00000000000000000000000000000001,-0.000000000000000000000000000000015,123456789012345678901234567890123]'),
             ('[1e33, -1e33, 1.5e40, 1e-33, -2.5e-40, 12345678901234567890123456789012345678, 1e131000, 1.0e-1000]',
              '[1e33,-1e33,1.5e40,1e-33,-2.5e-40,1.2345678901234567890123456789012345678e37,1e131000,1e-1000]'))
     AS t(j, c);

-- the same number in any spelling hashes equal, far out too
SELECT idem_request_hash('[1e131000, 0.001e-40]'::jsonb) = idem_request_hash('[10E130999, 1.000E-43]'::jsonb) AS far_equal;

-- a 74 kB request of such numbers hashes in time and memory of its size
-- (written out in full it was about 1 GB of text: out of memory)
SELECT length(idem_request_hash(('[' || repeat('1e131000,', 8200) || '1]')::jsonb)) AS bytes;

-- every number from 10^-32 to 10^32 hashes as before (trim_scale's text is
-- numeric_normalize's form there)
SELECT count(*) > 3000 AS many_numbers,
       count(*) FILTER (WHERE idem_request_hash(to_jsonb(x)) <> sha256(convert_to(trim_scale(x)::text, 'UTF8'))) AS differ
FROM (SELECT s * (i * 1234567 + i % 7)::numeric * power(10::numeric, e) AS x
      FROM generate_series(1, 40) i, generate_series(-41, 25) e, (VALUES (1), (-1)) AS g(s)) AS t
WHERE abs(x) >= 1e-32 AND abs(x) < 1e33;
