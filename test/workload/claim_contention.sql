-- test/workload/claim_contention.sql: pgbench script for the exactly-once load test.
--
-- Every transaction picks one of :nkeys shared keys and does what a payment
-- API handler does: claim the key; when the outcome is 'new', insert a
-- payment and complete the key with the payment's id, all in one
-- transaction; otherwise the claim's (replayed) response is what the client
-- gets.  With the default wait => true a duplicate that arrives while the
-- first claim is uncommitted waits for it and then replays.
--
-- Every claim's result row is logged in idem_bench.claims in the same
-- statement, so the checker (bench/exactly_once.sh, test/t/001_exactly_once.pl)
-- can prove: exactly one 'new' and one payment per key, and every replay
-- equal to the stored response.  idem_bench.payments deliberately has no
-- unique constraint on key: a double charge would show up as a second row.
--
-- Needs the tables bench/exactly_once.sh creates, and -D nkeys=N:
--   pgbench -n -c 8 -j 2 -t 1000 -D nkeys=50 -f test/workload/claim_contention.sql
-- Works with -M simple, extended or prepared.

\set k random(1, :nkeys)
BEGIN;
WITH claim AS (
    SELECT *
    FROM idem_claim('key-' || (:k)::text,
                    request => jsonb_build_object('order', (:k)::int, 'amount', 100 * (:k)::int),
                    scope => 'idem-bench')
), logged AS (
    INSERT INTO idem_bench.claims (key, outcome, token, status, response_code, response)
    SELECT 'key-' || (:k)::text, outcome, token, status::text, response_code, response
    FROM claim
    RETURNING outcome
)
SELECT outcome, (outcome = 'new') AS is_new FROM logged
\gset
\if :is_new
INSERT INTO idem_bench.payments (key, amount)
VALUES ('key-' || (:k)::text, 100 * (:k)::int)
RETURNING id AS payment_id
\gset
SELECT idem_complete('key-' || (:k)::text, 201,
                     jsonb_build_object('payment_id', (:payment_id)::bigint, 'amount', 100 * (:k)::int),
                     scope => 'idem-bench');
\endif
COMMIT;
