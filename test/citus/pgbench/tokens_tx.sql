-- the same claim inside a transaction block: never delegated, so it runs on
-- the node the client is connected to
\set k random(1, 20)
\set s random(1, 6)
BEGIN;
SELECT coalesce(token, 0) AS tok FROM idem_claim('fk' || :k, NULL, 'fs' || :s, lease => '1 ms') \gset
INSERT INTO token_log (scope, key, token, node) VALUES ('fs' || :s, 'fk' || :k, :tok, :node);
COMMIT;
