-- Replay of responses stored TOASTed: out of line (incompressible, ~190 kB)
-- and compressed in line (~6 kB of repeats).  The key's read takes the
-- whole row as one value; its fields must come back whole.
CREATE TEMP TABLE big AS
  SELECT jsonb_build_object('blob', string_agg(md5(i::text), '')) AS ext,
         jsonb_build_object('blob', repeat('ab', 3000)) AS cmp
  FROM generate_series(1, 6000) i;
BEGIN;
SELECT outcome FROM idem_claim('big-ext', '{"n": 1}', 'large');
SELECT idem_complete('big-ext', 200, (SELECT ext FROM big), 'large');
SELECT outcome FROM idem_claim('big-cmp', '{"n": 1}', 'large');
SELECT idem_complete('big-cmp', 201, (SELECT cmp FROM big), 'large');
COMMIT;
-- stored out of line, and compressed in line
SELECT pg_relation_size(reltoastrelid) > 0 AS out_of_line
  FROM pg_class WHERE oid = 'idempotency_keys'::regclass;
SELECT pg_column_size(response) < 1000 AS compressed_in_line
  FROM idempotency_keys WHERE scope = 'large' AND key = 'big-cmp';
SELECT c.outcome, c.response_code, c.response = (SELECT ext FROM big) AS same
  FROM idem_claim('big-ext', '{"n": 1}', 'large') c;
SELECT c.outcome, c.response_code, c.response = (SELECT cmp FROM big) AS same
  FROM idem_claim('big-cmp', '{"n": 1}', 'large') c;
-- idem_execute: a large result row replayed
SELECT outcome, md5(response::text) AS h FROM idem_execute('big-exec', '{}', 'large', 200,
  $$SELECT string_agg(md5(i::text), '') AS s FROM generate_series(1, 6000) i$$) \gset first_
SELECT outcome, md5(response::text) = :'first_h' AS same FROM idem_execute('big-exec', '{}', 'large', 200,
  $$SELECT string_agg(md5(i::text), '') AS s FROM generate_series(1, 6000) i$$);
DELETE FROM idempotency_keys WHERE scope = 'large';
