\set r random(1, 1000000000000)
INSERT INTO payments_uk (key, amount) VALUES ('k' || :client_id || '-' || :r, 100) ON CONFLICT (key) DO NOTHING RETURNING id;
