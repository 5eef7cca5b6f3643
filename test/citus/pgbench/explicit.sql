-- the explicit pattern: claim, pay, complete in one transaction; a replay
-- logs the response it was given
\set k random(1, 200)
\set m random(1, 4)
BEGIN;
SELECT (outcome IN ('new', 'reclaimed'))::int AS run, outcome AS oc, coalesce(response::text, '') AS resp
FROM idem_claim('x' || :k, jsonb_build_object('k', :k::int), 'em' || :m) \gset
\if :run
INSERT INTO payments (merchant_id, key, amount) VALUES ('em' || :m, 'x' || :k, :k::int) RETURNING id \gset
SELECT idem_complete('x' || :k, 201, jsonb_build_object('id', :id::bigint), 'em' || :m);
\else
INSERT INTO replays (scope, key, outcome, response) VALUES ('em' || :m, 'x' || :k, :oc, :resp);
\endif
COMMIT;
