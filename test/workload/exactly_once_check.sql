-- test/workload/exactly_once_check.sql: did test/workload/claim_contention.sql hold exactly once?
--
-- Needs psql variables nkeys (keys in play; 0 when they are not a fixed set,
-- as with test/workload/claim_burst.sql) and total (transactions run):
--   psql -X -At -F '|' -v nkeys=50 -v total=8000 -f test/workload/exactly_once_check.sql
-- Prints one line per check: name|t or f|what was found.  Every line must say t.

WITH
claims AS (SELECT * FROM idem_bench.claims),
claimed_keys AS (SELECT DISTINCT key FROM claims),
pay AS (SELECT key, count(*) AS n, min(id) AS id, min(amount) AS amount
        FROM idem_bench.payments GROUP BY key),
stored AS (SELECT * FROM idempotency_keys WHERE scope = 'idem-bench'),
news AS (SELECT key, count(*) AS n FROM claims WHERE outcome = 'new' GROUP BY key)
SELECT * FROM (VALUES
    ('every transaction made one claim',
     (SELECT count(*) FROM claims) = :total,
     format('%s claims for %s transactions', (SELECT count(*) FROM claims), :total)),
    ('every outcome is new or replay',
     NOT EXISTS (SELECT FROM claims WHERE outcome NOT IN ('new', 'replay')),
     (SELECT format('outcomes: %s', string_agg(format('%s=%s', outcome, n), ', ' ORDER BY outcome))
      FROM (SELECT outcome, count(*) AS n FROM claims GROUP BY outcome) AS o)),
    ('every key was drawn',
     (SELECT count(*) FROM claimed_keys) = :nkeys OR :total < 20 * :nkeys OR :nkeys = 0,
     format('%s of %s keys drawn', (SELECT count(*) FROM claimed_keys), :nkeys)),
    ('exactly one new per key',
     NOT EXISTS (SELECT FROM claimed_keys c LEFT JOIN news n USING (key)
                 WHERE n.n IS DISTINCT FROM 1),
     format('%s keys with other than one new',
            (SELECT count(*) FROM claimed_keys c LEFT JOIN news n USING (key)
             WHERE n.n IS DISTINCT FROM 1))),
    ('exactly one payment per key',
     NOT EXISTS (SELECT FROM claimed_keys c LEFT JOIN pay p USING (key)
                 WHERE p.n IS DISTINCT FROM 1),
     format('%s payments for %s keys; %s keys paid twice or more, %s keys unpaid',
            (SELECT count(*) FROM idem_bench.payments), (SELECT count(*) FROM claimed_keys),
            (SELECT count(*) FROM pay WHERE n > 1),
            (SELECT count(*) FROM claimed_keys c LEFT JOIN pay p USING (key) WHERE p.key IS NULL))),
    ('no payment without a claimed key',
     NOT EXISTS (SELECT FROM pay p LEFT JOIN claimed_keys c USING (key) WHERE c.key IS NULL),
     format('%s payments for keys never claimed',
            (SELECT count(*) FROM pay p LEFT JOIN claimed_keys c USING (key) WHERE c.key IS NULL))),
    ('every key completed with its payment',
     NOT EXISTS (SELECT FROM claimed_keys c
                 LEFT JOIN stored s USING (key) LEFT JOIN pay p USING (key)
                 WHERE s.status IS DISTINCT FROM 'completed'
                    OR s.response_code IS DISTINCT FROM 201
                    OR s.response IS DISTINCT FROM
                       jsonb_build_object('payment_id', p.id, 'amount', p.amount)),
     format('%s keys not completed with their payment (of %s stored rows)',
            (SELECT count(*) FROM claimed_keys c
             LEFT JOIN stored s USING (key) LEFT JOIN pay p USING (key)
             WHERE s.status IS DISTINCT FROM 'completed'
                OR s.response_code IS DISTINCT FROM 201
                OR s.response IS DISTINCT FROM
                   jsonb_build_object('payment_id', p.id, 'amount', p.amount)),
            (SELECT count(*) FROM stored))),
    ('the stored token is the one the new claim got',
     NOT EXISTS (SELECT FROM claims c JOIN stored s USING (key)
                 WHERE c.outcome = 'new' AND c.token IS DISTINCT FROM s.token),
     format('%s keys whose stored token differs',
            (SELECT count(*) FROM claims c JOIN stored s USING (key)
             WHERE c.outcome = 'new' AND c.token IS DISTINCT FROM s.token))),
    ('every replay equals the stored response',
     NOT EXISTS (SELECT FROM claims c LEFT JOIN stored s USING (key)
                 WHERE c.outcome = 'replay'
                   AND (c.response IS DISTINCT FROM s.response
                        OR c.response_code IS DISTINCT FROM s.response_code
                        OR c.status IS DISTINCT FROM 'completed')),
     format('%s of %s replays differ from the stored response',
            (SELECT count(*) FROM claims c LEFT JOIN stored s USING (key)
             WHERE c.outcome = 'replay'
               AND (c.response IS DISTINCT FROM s.response
                    OR c.response_code IS DISTINCT FROM s.response_code
                    OR c.status IS DISTINCT FROM 'completed')),
            (SELECT count(*) FROM claims WHERE outcome = 'replay')))
) AS checks(name, ok, found);
