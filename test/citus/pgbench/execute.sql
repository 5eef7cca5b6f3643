-- idem_execute, autocommit (delegated on the coordinator); every answer is
-- logged
\set k random(1, 200)
\set m random(1, 4)
SELECT outcome AS oc, coalesce(response::text, '') AS resp FROM idem_execute('y' || :k, NULL, 'xm' || :m, 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id', 'xm' || :m, 'y' || :k, :k::int) \gset
INSERT INTO replays (scope, key, outcome, response) VALUES ('xm' || :m, 'y' || :k, :oc, :resp);
