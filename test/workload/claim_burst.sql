-- test/workload/claim_burst.sql: pgbench script, duplicates that arrive mid-flight.
--
-- A harsher variant of test/workload/claim_contention.sql.  Keys are fresh every
-- 100 ms ('burst-<window><k>', k from 1 to :nkeys), so all clients keep
-- colliding on keys whose first claim is still uncommitted; the claimant
-- holds its transaction open 5 ms between the payment and idem_complete.
-- The duplicates must wait (wait => true) and then replay, never pay.
-- Logs to the same tables and is checked the same way as claim_contention
-- (test/workload/exactly_once_check.sql with -v nkeys=0, as keys are not fixed):
--   pgbench -n -c 8 -j 2 -t 500 -D nkeys=3 -f test/workload/claim_burst.sql

\set k random(1, :nkeys)
BEGIN;
WITH claim AS (
    SELECT w.keyno, c.*
    FROM (SELECT (floor(extract(epoch FROM clock_timestamp()) * 10)::bigint % 1000000) * 1000
                 + (:k)::int AS keyno) AS w,
         LATERAL idem_claim('burst-' || w.keyno::text,
                            request => jsonb_build_object('order', w.keyno, 'amount', 100 * (:k)::int),
                            scope => 'idem-bench') AS c
), logged AS (
    INSERT INTO idem_bench.claims (key, outcome, token, status, response_code, response)
    SELECT 'burst-' || keyno::text, outcome, token, status::text, response_code, response
    FROM claim
    RETURNING outcome, key
)
SELECT outcome, (outcome = 'new') AS is_new, split_part(key, '-', 2)::bigint AS keyno FROM logged
\gset
\if :is_new
INSERT INTO idem_bench.payments (key, amount)
VALUES ('burst-' || (:keyno)::text, 100 * (:k)::int)
RETURNING id AS payment_id
\gset
\sleep 5 ms
SELECT idem_complete('burst-' || (:keyno)::text, 201,
                     jsonb_build_object('payment_id', (:payment_id)::bigint, 'amount', 100 * (:k)::int),
                     scope => 'idem-bench');
\endif
COMMIT;
