-- (4) the explicit pattern with a new key: claim, INSERT, complete in one transaction
\set m random(1, 1000)
\set k random(1000000000, 999999999999999)
BEGIN;
SELECT token AS tok FROM idem_claim(:k, jsonb_build_object('order_id', :k::text, 'amount', 3), :m) \gset
INSERT INTO payments (merchant_id, key, amount) VALUES (:m, :k, 3) RETURNING id \gset
SELECT idem_complete(:k, 201, jsonb_build_object('id', :id::bigint), :m, :tok);
COMMIT;
