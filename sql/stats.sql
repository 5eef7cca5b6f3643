-- idempotency_stats: counters of what happened, and the table's state now.
\set SHOW_CONTEXT never
DELETE FROM idempotency_keys;
SELECT idem_stats_reset();
SELECT claims_new, claims_replay, completes, stats_reset <= now() AS reset_time_set
FROM idempotency_stats;

-- one of each outcome, a mismatch, a stale token, a complete and a fail
BEGIN;
SELECT outcome FROM idem_claim('s1', '{"a": 1}', 'stats');
SELECT idem_complete('s1', 200, '{}', 'stats');
COMMIT;
SELECT outcome FROM idem_claim('s1', '{"a": 1}', 'stats');
SELECT outcome FROM idem_claim('s1', '{"a": 2}', 'stats');
SELECT token AS t FROM idem_claim('s2', NULL, 'stats', lease => '10 ms') \gset
SELECT outcome FROM idem_claim('s3', NULL, 'stats');
SELECT outcome FROM idem_claim('s3', NULL, 'stats');
SELECT pg_sleep(0.05);
SELECT outcome FROM idem_claim('s2', NULL, 'stats');
\set VERBOSITY terse
SELECT idem_fail('s2', 'stats', :t);
\set VERBOSITY default
SET idempotency.stale_policy = 'hold';
SELECT outcome FROM idem_claim('s4', NULL, 'stats', lease => '1 ms');
SELECT pg_sleep(0.01);
SELECT outcome FROM idem_claim('s4', NULL, 'stats');
RESET idempotency.stale_policy;
SELECT idem_expire();

SELECT claims_new, claims_replay, claims_in_progress, claims_reclaimed, claims_stale,
       request_mismatches, completes, fails, stale_tokens, leases_expired, rows_deleted,
       max_batch_rows, processing_keys, stale_processing_keys,
       oldest_processing_age > '0' AS has_oldest, table_bytes > 0 AS has_size
FROM idempotency_stats;

-- reset zeroes the counters
SELECT idem_stats_reset();
SELECT claims_new + claims_replay + completes + leases_expired AS total FROM idempotency_stats;

-- the view and the reset are for idempotency_admin
CREATE ROLE stats_app IN ROLE idempotency_app;
SET ROLE stats_app;
SELECT count(*) FROM idempotency_stats;
SELECT idem_stats_reset();
RESET ROLE;
DROP ROLE stats_app;

-- the counters added in 0.4.0, for attempt limits and waited-for claims:
-- a takeover past the limit, and a claim that waited (50 ms, in vain) for
-- a claim in flight
SELECT attempts_exhausted, claims_awaited FROM idempotency_stats;
SELECT outcome FROM idem_claim('s5', NULL, 'stats', lease => '1 ms');
SELECT pg_sleep(0.01);
SELECT outcome, status FROM idem_claim('s5', NULL, 'stats', max_attempts => 1);
SELECT outcome FROM idem_claim('s6', NULL, 'stats', lease => '1 h');
SELECT outcome FROM idem_claim('s6', NULL, 'stats', await_result => '50 ms');
SELECT attempts_exhausted, claims_awaited FROM idempotency_stats;

-- the counters are this database's: another database's claims are not in
-- them, and each database's reset zeroes its own
SELECT current_database() AS regdb \gset
SELECT outcome FROM idem_claim('here', NULL, 'stats');
SET client_min_messages = warning;
CREATE DATABASE idem_stats_other;
RESET client_min_messages;
\c idem_stats_other
SET client_min_messages = warning;
CREATE EXTENSION idempotency;
RESET client_min_messages;
SELECT outcome FROM idem_claim('o1', NULL, 'stats');
SELECT outcome FROM idem_claim('o2', NULL, 'stats');
SELECT outcome FROM idem_claim('o2', NULL, 'stats');
SELECT claims_new, claims_in_progress FROM idempotency_stats;
\c :regdb
SELECT claims_new, claims_in_progress FROM idempotency_stats;
SELECT datname = current_database() AS here, claims_new, claims_in_progress
FROM idem_stats_databases()
WHERE datname IN (current_database(), 'idem_stats_other') ORDER BY here;
SELECT idem_stats_reset();
SELECT datname = current_database() AS here, claims_new, claims_in_progress
FROM idem_stats_databases()
WHERE datname IN (current_database(), 'idem_stats_other') ORDER BY here;
-- a dropped database's counters stay, datname NULL, until a reset frees them
SELECT oid AS other_oid FROM pg_database WHERE datname = 'idem_stats_other' \gset
DROP DATABASE idem_stats_other;
SELECT datname IS NULL AS dropped, claims_new FROM idem_stats_databases() WHERE dbid = :other_oid;
SELECT idem_stats_reset();
SELECT count(*) AS kept FROM idem_stats_databases() WHERE dbid = :other_oid;
SET ROLE idempotency_admin;
SELECT count(*) > 0 AS admin_reads FROM idem_stats_databases();
RESET ROLE;

-- the columns of monitoring/queries.yaml's query (make check-monitoring runs the file) exist
SELECT count(*) AS rows FROM (
    SELECT claims_new, claims_replay, claims_in_progress, claims_reclaimed, claims_stale,
           request_mismatches, completes, fails, stale_tokens, leases_expired, rows_deleted,
           worker_errors, attempts_exhausted, claims_awaited, processing_keys, stale_processing_keys,
           coalesce(extract(epoch FROM oldest_processing_age), 0) AS oldest_processing_seconds,
           table_bytes
    FROM idempotency_stats) q;
