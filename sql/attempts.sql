-- Attempts: counted per key, limited per call or by idempotency.max_attempts.
\set SHOW_CONTEXT never
SET idempotency.lease = '1h';
-- a holder's failure, retryable, with the token its claim returned
CREATE FUNCTION fail_att(k text, code int DEFAULT 502, body jsonb DEFAULT '{"error": "card network"}')
RETURNS void LANGUAGE sql
AS $$ SELECT idem_fail(k, 'att', (SELECT token FROM idem_lookup(k, 'att')), code, body) $$;

-- the first claim is attempt 1; each takeover adds one
SELECT outcome FROM idem_claim('att-1', '{"n": 1}', 'att');
SELECT attempts FROM idem_lookup('att-1', 'att');
SELECT fail_att('att-1');
SELECT outcome FROM idem_claim('att-1', '{"n": 1}', 'att');
SELECT attempts FROM idem_lookup('att-1', 'att');
-- a lease that ran out (a holder that crashed) is taken over and counted too
UPDATE idempotency_keys SET locked_until = now() - interval '1 s' WHERE key = 'att-1';
SELECT outcome FROM idem_claim('att-1', '{"n": 1}', 'att');
SELECT attempts FROM idem_lookup('att-1', 'att');

-- no limit by default, and 0 means none
SHOW idempotency.max_attempts;
SELECT fail_att('att-1');
SELECT outcome FROM idem_claim('att-1', '{"n": 1}', 'att', max_attempts => 0);
SELECT attempts FROM idem_lookup('att-1', 'att');

-- past the limit the key becomes final: failed, not retryable, under a new
-- token, its response saying so with the last attempt's; answered as a replay
SELECT token AS t4 FROM idem_lookup('att-1', 'att') \gset
SELECT idem_fail('att-1', 'att', :t4, 503, '{"error": "still down"}');
SELECT outcome, token, status, response_code, response
FROM idem_claim('att-1', '{"n": 1}', 'att', max_attempts => 4);
SELECT status, retryable, attempts, locked_until, token > :t4 AS new_token,
       expires_at > now() + interval '23 h' AS kept_for_retention, due_at = expires_at AS due_at_expiry
FROM idem_lookup('att-1', 'att');
-- and stays so: later claims replay it, whatever their limit
SELECT outcome, status, response->>'error' AS error FROM idem_claim('att-1', '{"n": 1}', 'att');
SELECT outcome, status FROM idem_claim('att-1', '{"n": 1}', 'att', max_attempts => 10);
-- the request is still checked
SELECT * FROM idem_claim('att-1', '{"n": 2}', 'att');
\echo :LAST_ERROR_SQLSTATE

-- a holder whose lease ran out is fenced off when its key is made final
SELECT token AS t1 FROM idem_claim('att-2', NULL, 'att') \gset
UPDATE idempotency_keys SET locked_until = now() - interval '1 s' WHERE key = 'att-2';
SELECT outcome, status, response FROM idem_claim('att-2', NULL, 'att', max_attempts => 1);
SELECT idem_complete('att-2', 201, '{"late": true}', 'att', :t1);
\echo :LAST_ERROR_SQLSTATE
SELECT status, response->>'error' AS error FROM idem_lookup('att-2', 'att');

-- the setting: the default of every claim, idem_execute's included
SET idempotency.max_attempts = 2;
SELECT outcome FROM idem_claim('att-3', NULL, 'att');
SELECT fail_att('att-3', 500, NULL);
SELECT outcome FROM idem_claim('att-3', NULL, 'att');
SELECT fail_att('att-3', 500, NULL);
SELECT outcome, status, response FROM idem_claim('att-3', NULL, 'att');
-- an argument overrides it
SELECT outcome FROM idem_claim('att-4', NULL, 'att');
SELECT fail_att('att-4', 500, NULL);
SELECT outcome FROM idem_claim('att-4', NULL, 'att');
SELECT fail_att('att-4', 500, NULL);
SELECT outcome FROM idem_claim('att-4', NULL, 'att', max_attempts => 3);
SELECT attempts FROM idem_lookup('att-4', 'att');
CREATE TABLE att_payments (id serial, amount int);
SELECT outcome, status FROM idem_execute('att-5', '{"a": 1}', 'att', 201,
    'INSERT INTO att_payments (amount) VALUES (1) RETURNING id');
UPDATE idempotency_keys SET status = 'failed', retryable = true, attempts = 2 WHERE key = 'att-5';
SELECT outcome, status, response->>'error' AS error FROM idem_execute('att-5', '{"a": 1}', 'att', 201,
    'INSERT INTO att_payments (amount) VALUES (1) RETURNING id');
SELECT count(*) AS payments FROM att_payments;
RESET idempotency.max_attempts;

-- a key that starts afresh after its expiry counts from 1 again
UPDATE idempotency_keys SET expires_at = now() - interval '1 s' WHERE key = 'att-4';
SELECT outcome FROM idem_claim('att-4', NULL, 'att');
SELECT attempts FROM idem_lookup('att-4', 'att');

-- an operator still settles a key made final: release lets the client try again
SELECT idem_resolve('att-3', 'att', 'release');
SELECT outcome FROM idem_claim('att-3', NULL, 'att');
SELECT attempts FROM idem_lookup('att-3', 'att');
-- or fail stores the answer the client should get
SELECT idem_resolve('att-1', 'att', 'fail', 402, '{"error": "card_declined"}');
SELECT outcome, status, response_code, response FROM idem_claim('att-1', '{"n": 1}', 'att');
-- a key failed by its holder is not the operator's to settle
SELECT idem_fail('att-4', 'att', (SELECT token FROM idem_lookup('att-4', 'att')), 400, NULL, retryable => false);
SELECT idem_resolve('att-4', 'att', 'release');
\echo :LAST_ERROR_SQLSTATE

-- a last response too long to keep inside the exhausted one (its text within
-- 256 bytes of the 256 MB a response may have): left out, and said so; the
-- key is made final all the same (it failed the table's CHECK, 23514, until
-- 2026-11-27, and so could never end)
BEGIN;
SELECT outcome FROM idem_claim('att-big', NULL, 'att');
SELECT idem_fail('att-big', 'att', NULL, 500, (SELECT jsonb_agg(v) FROM
    (SELECT to_jsonb('1e131071'::numeric) v FROM generate_series(1, 2047)
     UNION ALL SELECT to_jsonb(repeat('a', 126960))) s), true);
COMMIT;
SELECT outcome, status, response_code, response->'last_response' AS last_response,
       response->>'last_response_omitted' AS omitted
FROM idem_claim('att-big', NULL, 'att', max_attempts => 1);
DELETE FROM idempotency_keys WHERE key = 'att-big';

-- the last response is kept inside the exhausted one as stored, whatever its
-- shape: the same jsonb as built by SQL (equal, the same text, hash and size)
CREATE FUNCTION exhaust_with(k text, body jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    PERFORM idem_fail(k, 'att-shape', (SELECT token FROM idem_claim(k, NULL, 'att-shape')), 500, body, true);
    RETURN (SELECT response FROM idem_claim(k, NULL, 'att-shape', max_attempts => 1));
END $$;
WITH shapes(i, body) AS (VALUES (1, 'null'::jsonb), (2, 'true'), (3, 'false'), (4, '0'), (5, '-1.50'),
    (6, '"é ✓ \u0001"'), (7, '""'), (8, '[]'), (9, '{}'), (10, '[1, "a", null, [2, {"b": 3.5}]]'),
    (11, (SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 40) g)),
    (12, (SELECT jsonb_agg(CASE WHEN g % 3 = 0 THEN to_jsonb(g) ELSE to_jsonb(repeat('x', g)) END) FROM generate_series(1, 70) g)),
    (13, '1e131071'), (14, '{"a": {"b": {"c": [true, false, 1e-5]}}}')),
r AS (SELECT i, body, exhaust_with('shape-' || i, body) AS got,
      jsonb_build_object('error', 'attempts_exhausted', 'attempts', 1, 'max_attempts', 1, 'last_response', body) AS want
      FROM shapes)
SELECT i, got = want AS equal, got::text = want::text AS same_text, jsonb_hash(got) = jsonb_hash(want) AS same_hash,
       got @> want AND want @> got AS contains, got->'last_response' = body AS last_response,
       pg_column_size(got) = pg_column_size(want) AS same_size
FROM r ORDER BY i;
DELETE FROM idempotency_keys WHERE scope = 'att-shape';

-- bad limits
SELECT * FROM idem_claim('att-6', NULL, 'att', max_attempts => -1);
\echo :LAST_ERROR_SQLSTATE
SET idempotency.max_attempts = -1;
