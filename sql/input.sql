-- Odd input: keys and scopes at and past their bounds, every JSON kind, big
-- requests and responses.  Every rejection leaves stored rows unchanged.
\set SHOW_CONTEXT never

SELECT outcome FROM idem_claim('keep', '{"a": 1}', 'input');
SELECT row_of('keep', 'input') AS before \gset

-- NULL, empty, over-long, unprintable
SELECT * FROM idem_claim(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('keep', '{"a": 1}', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim(repeat('k', 256), NULL, 'input');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('k', NULL, repeat('s', 256));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim(E'new\nline', NULL, 'input');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('del' || chr(127), NULL, 'input');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM idem_claim('k', NULL, E'tab\there');
\echo :LAST_ERROR_SQLSTATE
SELECT row_of('keep', 'input') = :'before' AS unchanged;

-- exactly at the limit is fine; the limit counts bytes, not characters
SELECT outcome FROM idem_claim(repeat('k', 255), NULL, 'input');
SELECT outcome FROM idem_claim(repeat('k', 253) || 'é', NULL, 'input');   -- 255 bytes
SELECT outcome FROM idem_claim(repeat('k', 254) || 'é', NULL, 'input');   -- 256 bytes
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_claim('k', NULL, repeat('s', 255));
-- multibyte, spaces and punctuation are ordinary key characters
SELECT outcome FROM idem_claim('支付-訂單 #42 / ünïcødé', NULL, 'input');
SELECT outcome FROM idem_claim('支付-訂單 #42 / ünïcødé', NULL, 'input');

-- every JSON kind is a request
SELECT j AS request, (SELECT outcome FROM idem_claim('kind-' || j, j::jsonb, 'input')) AS first,
       (SELECT outcome FROM idem_claim('kind-' || j, j::jsonb, 'input')) AS second
FROM (VALUES ('null'), ('true'), ('false'), ('0'), ('-1.5e3'), ('"text"'), ('[]'), ('{}'),
             ('[1, "a", null, {"b": [false]}]')) AS t(j);
-- JSON null is a request; SQL NULL is no request: different
SELECT * FROM idem_claim('kind-null', NULL, 'input');
\echo :LAST_ERROR_SQLSTATE

-- big requests and responses: 1 MB each way
BEGIN;
SELECT outcome FROM idem_claim('big', jsonb_build_object('blob', repeat('x', 1048576)), 'input');
SELECT idem_complete('big', 200, jsonb_build_object('echo', repeat('y', 1048576)), 'input');
COMMIT;
SELECT outcome, length(response ->> 'echo') AS echoed
FROM idem_claim('big', jsonb_build_object('blob', repeat('x', 1048576)), 'input');
SELECT * FROM idem_claim('big', jsonb_build_object('blob', repeat('x', 1048575)), 'input');
\echo :LAST_ERROR_SQLSTATE

-- negative and odd response codes are stored as given
BEGIN;
SELECT outcome FROM idem_claim('codes', NULL, 'input');
SELECT idem_complete('codes', -1, NULL, 'input');
COMMIT;
SELECT outcome, response_code, response FROM idem_claim('codes', NULL, 'input');
