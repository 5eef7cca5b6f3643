\set r random(1, 1000000000000)
INSERT INTO payments (order_id, amount) VALUES ('o' || :client_id || '-' || :r, 100) RETURNING id;
