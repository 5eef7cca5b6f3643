\set k random(1, 4)
SELECT outcome, response FROM idem_execute('c' || :k || '-' || (extract(epoch FROM now())::bigint / 2), '{"amount": 100}', 'contention', 201,
    'INSERT INTO payments_c (key, amount) VALUES ($1, $2) RETURNING id AS payment_id', 'c' || :k || '-' || (extract(epoch FROM now())::bigint / 2), 100);
