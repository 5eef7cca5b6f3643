-- test/workload/expire_claims.sql: the claim load that runs while the worker expires
-- (bench/expire_bench.sh, test/t/014_worker_load.pl).  pgbench -D live_rows=N.
-- Each transaction pays for a new key (claim and complete in one transaction)
-- and replays a live key of scope 'live' (keys k1 .. kN, stored without a
-- request).  An outcome other than the expected one divides by zero, so it
-- fails the transaction and pgbench reports it.
\set k random(1, 1000000000000000)
\set live random(1, :live_rows)
BEGIN;
SELECT 1 / (outcome = 'new')::int FROM idem_claim('c' || :client_id || '-' || :k, '{"amount": 100}', 'claims');
SELECT idem_complete('c' || :client_id || '-' || :k, 201, '{"payment_id": 1}', 'claims');
COMMIT;
SELECT 1 / (outcome = 'replay')::int FROM idem_claim('k' || :live, NULL, 'live');
