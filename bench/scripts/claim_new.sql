\set r random(1, 1000000000000)
BEGIN;
SELECT outcome FROM idem_claim('k' || :client_id || '-' || :r, '{"order": "A1", "amount": 100}', 'bench');
INSERT INTO payments (order_id, amount) VALUES ('A1', 100) RETURNING id \gset
SELECT idem_complete('k' || :client_id || '-' || :r, 201, jsonb_build_object('payment_id', :id::bigint), 'bench');
COMMIT;
