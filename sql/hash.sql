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
