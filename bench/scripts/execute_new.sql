\set r random(1, 1000000000000)
SELECT outcome, response FROM idem_execute('x' || :client_id || '-' || :r, '{"order": "A1", "amount": 100}', 'bench', 201,
    'INSERT INTO payments (order_id, amount) VALUES ($1, $2) RETURNING id AS payment_id', 'A1', 100);
