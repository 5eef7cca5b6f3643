\set k random(1, 10000)
SELECT outcome, response FROM idem_execute('r' || :k, '{"order": "A1", "amount": 100}', 'replay', 201,
    'INSERT INTO payments (order_id, amount) VALUES ($1, $2) RETURNING id AS payment_id', 'A1', 100);
