-- (2) idem_execute of the same INSERT with a new key (autocommit)
\set m random(1, 1000)
\set k random(1000000000, 999999999999999)
SELECT outcome, response FROM idem_execute(:k, jsonb_build_object('order_id', :k::text, 'amount', 2), :m, 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id', :m::text, :k::text, 2);
