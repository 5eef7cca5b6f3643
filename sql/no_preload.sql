-- Without shared_preload_libraries (make installcheck PRELOAD=0, the default
-- configuration): what the docs say answers differently.  Everything else of
-- the suite runs the same with and without the preload.
\set VERBOSITY sqlstate
-- nothing preloaded: the library loads at a key function's first call
SHOW shared_preload_libraries;
-- a claim loads the library in this session, and works as with the preload
BEGIN;
SELECT outcome FROM idem_claim('np-1', '{"a": 1}', 'no-preload');
SELECT idem_complete('np-1', 201, '{"id": 1}', 'no-preload');
COMMIT;
SELECT outcome, response_code, response FROM idem_claim('np-1', '{"a": 1}', 'no-preload');
-- every setting a session can use is there, at its default
SELECT name, setting, context FROM pg_settings
WHERE name LIKE 'idempotency.%' ORDER BY name;
-- the one that sizes shared memory exists only when preloaded
SHOW idempotency.stats_max_databases;
-- no counters: idem_stats() is a row of NULLs, idem_stats_databases() empty,
-- idem_stats_reset() refuses with 55000
SELECT s IS NULL AS all_null FROM idem_stats() s;
SELECT count(*) FROM idem_stats_databases();
SELECT claims_new IS NULL AS no_counts, processing_keys >= 0 AS has_gauges FROM idempotency_stats;
SELECT idem_stats_reset();
-- no background worker: expiry is idem_expire(), by hand or by a scheduler
SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idempotency%';
SELECT idem_expire() >= 0 AS expired;
-- a new session: its first call loads the library again
\c
SELECT outcome, response_code FROM idem_claim('np-1', '{"a": 1}', 'no-preload');
DELETE FROM idempotency_keys WHERE scope = 'no-preload';
