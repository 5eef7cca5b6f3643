-- (3) idem_execute replay of one of the keys 1..:nkeys, loaded before the runs
-- (scope 1 + key % 1000)
\set i random(1, :nkeys)
\set m 1 + :i % 1000
SELECT outcome, response FROM idem_execute(:i, jsonb_build_object('order_id', :i::text, 'amount', 2), :m, 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id', :m::text, :i::text, 2);
