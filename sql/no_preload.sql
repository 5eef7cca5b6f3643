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
-- A setting's value given before the library is loaded (a placeholder's)
-- that PostgreSQL refuses, with a WARNING, when the library defines the
-- setting left it at its default, not at the value the DBA gave: the
-- connection's options had replaced that meanwhile.  A role undid the
-- database's stale_policy = hold (a stale claim taken over: a second
-- attempt of a payment) or its lowered max_key_length; a mistyped
-- retention became a day.  Such a session's calls are refused (22023),
-- as a preloaded library refuses the session at its start.
-- (np_app connects with a password: the package's test, pg_virtualenv,
-- asks for one over TCP; psql's HOST is a socket's directory or a host)
SELECT current_database() AS np_db, current_user AS np_superuser,
       format('postgresql://np_app:np-app-password@%s:%s/%s?options=',
              CASE WHEN :'HOST' LIKE '/%' THEN replace(:'HOST', '/', '%2F') ELSE :'HOST' END,
              :'PORT', current_database()) AS np_uri \gset
CREATE ROLE np_app LOGIN PASSWORD 'np-app-password' IN ROLE idempotency_app;
ALTER DATABASE :"np_db" SET idempotency.stale_policy = 'hold';
SELECT outcome FROM idem_claim('np-stale', NULL, 'no-preload');
UPDATE idempotency_keys SET locked_until = now() - interval '1 s', due_at = '-infinity'
WHERE scope = 'no-preload' AND key = 'np-stale';
\c :np_uri
SHOW idempotency.stale_policy;
SELECT outcome FROM idem_claim('np-stale', NULL, 'no-preload');
\c :np_uri-c%20idempotency.stale_policy%3Dreclaim
SELECT outcome FROM idem_claim('np-stale', NULL, 'no-preload');
SELECT outcome FROM idem_execute('np-stale', NULL, 'no-preload', 201, 'SELECT 1 AS paid');
\c :np_uri-c%20idempotency.max_key_length%3D1024
SELECT outcome FROM idem_claim('np-length', NULL, 'no-preload');
-- an invalid value, given by any role: the same
\c :np_uri-c%20idempotency.retention%3D7days
SELECT outcome FROM idem_claim('np-retention', NULL, 'no-preload');
-- a valid value the session sets since counts as set
SET idempotency.retention = '7d';
SELECT outcome FROM idem_claim('np-retention', NULL, 'no-preload');
SELECT expires_at > now() + interval '6 days' AS kept_a_week FROM idempotency_keys
WHERE scope = 'no-preload' AND key = 'np-retention';
-- the DBA's hold, with no value of the caller's, still holds
\c :np_uri
SELECT outcome FROM idem_claim('np-stale', NULL, 'no-preload');
-- values the session set and let go before the first call count for
-- nothing (placeholders left without a value: PostgreSQL 17 on)
\c :np_uri
BEGIN;
SET LOCAL idempotency.lease = '30s';
COMMIT;
SET idempotency.max_attempts = 3;
RESET idempotency.max_attempts;
BEGIN;
SET idempotency.await_result = '1s';
ROLLBACK;
SELECT outcome FROM idem_claim('np-stale', NULL, 'no-preload');
-- a value the session SET that PostgreSQL refuses as it loads the library
-- (which a preloaded library refuses at the SET): the call that loaded it
-- is refused, and the value below it stays in force
\c :np_uri
BEGIN;
SET LOCAL idempotency.stale_policy = 'reclaim';
SELECT outcome FROM idem_claim('np-stale', NULL, 'no-preload');
ROLLBACK;
SHOW idempotency.stale_policy;
SELECT outcome FROM idem_claim('np-stale', NULL, 'no-preload');
\c :np_uri
SET idempotency.retention = '7days';
SELECT outcome FROM idem_claim('np-typo', NULL, 'no-preload');
SHOW idempotency.retention;
SELECT outcome FROM idem_claim('np-typo', NULL, 'no-preload');
\c - :np_superuser
ALTER DATABASE :"np_db" RESET idempotency.stale_policy;
DROP ROLE np_app;
DELETE FROM idempotency_keys WHERE scope = 'no-preload';
