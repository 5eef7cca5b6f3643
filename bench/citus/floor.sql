-- (1) the floor: a plain distributed INSERT of a payment, new scope/key
\set m random(1, 1000)
\set k random(1000000000, 999999999999999)
INSERT INTO payments (merchant_id, key, amount) VALUES (:m, :k, 1) RETURNING id;
