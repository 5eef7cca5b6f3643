-- a claim of one of 120 keys with a 1 ms lease (taken over at once by the
-- next one), autocommit (delegated when run on the coordinator); its token
-- is logged with the node that ran the client
\set k random(1, 20)
\set s random(1, 6)
SELECT coalesce(token, 0) AS tok FROM idem_claim('fk' || :k, NULL, 'fs' || :s, lease => '1 ms') \gset
INSERT INTO token_log (scope, key, token, node) VALUES ('fs' || :s, 'fk' || :k, :tok, :node);
