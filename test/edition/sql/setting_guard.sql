-- The SQL edition only (test/edition/sql/): idempotency.stale_policy and
-- idempotency.max_key_length are PGC_SUSET in the C build, a tenant cannot
-- SET them; in the edition they are placeholders any role can SET, so the
-- edition ignores the session's value unless the session user is a
-- superuser, and reads ALTER ROLE/DATABASE ... SET from pg_db_role_setting
-- (edition/functions/common.sql, idem__setting).
\set SHOW_CONTEXT never
SELECT current_database() AS db \gset
CREATE ROLE idem_guard_tenant LOGIN IN ROLE idempotency_app;
ALTER DATABASE :"db" SET idempotency.stale_policy = 'hold';
ALTER DATABASE :"db" SET idempotency.max_key_length = 8;
\c - idem_guard_tenant
\set SHOW_CONTEXT never
-- a claim whose lease runs out: stale under hold
SELECT outcome, status FROM idem_claim('guard-1', scope => 'guard', lease => '1 ms');
SELECT pg_sleep(0.05);
SELECT outcome, status FROM idem_claim('guard-1', scope => 'guard');
-- the tenant turns hold into reclaim for itself: the session says so ...
SET idempotency.stale_policy = 'reclaim';
SELECT current_setting('idempotency.stale_policy') AS session_value;
-- ... pg_settings lists no placeholder ...
SELECT count(*) AS listed FROM pg_settings WHERE name LIKE 'idempotency.%';
-- ... and the edition does not take it: the key stays held
SELECT outcome, status FROM idem_claim('guard-1', scope => 'guard');
SELECT set_config('idempotency.stale_policy', 'reclaim', true) IS NOT NULL AS set;
SELECT outcome, status FROM idem_claim('guard-1', scope => 'guard');
SELECT status, attempts FROM idem_lookup('guard-1', 'guard');
-- nor can it store a value where the edition reads it
ALTER ROLE idem_guard_tenant SET idempotency.stale_policy = 'reclaim';
ALTER ROLE idem_guard_tenant IN DATABASE :"db" SET idempotency.stale_policy = 'reclaim';
\set VERBOSITY sqlstate
ALTER DATABASE :"db" SET idempotency.stale_policy = 'reclaim';
\set VERBOSITY default
-- max_key_length likewise: the database's 8, not the session's 1000
SET idempotency.max_key_length = 1000;
SELECT outcome FROM idem_claim('123456789', scope => 'guard');
SELECT outcome FROM idem_claim('12345678', scope => 'guard');
-- a misspelt stored value is an error, never the default
\c - postgres
ALTER DATABASE :"db" SET idempotency.stale_policy = 'hodl';
\c - idem_guard_tenant
\set SHOW_CONTEXT never
SELECT outcome FROM idem_claim('guard-1', scope => 'guard');
-- PostgreSQL's precedence: the role in the database, then the role, then
-- the database
\c - postgres
ALTER DATABASE :"db" SET idempotency.stale_policy = 'hold';
ALTER ROLE idem_guard_tenant SET idempotency.stale_policy = 'reclaim';
ALTER ROLE idem_guard_tenant IN DATABASE :"db" SET idempotency.stale_policy = 'hold';
\c - idem_guard_tenant
\set SHOW_CONTEXT never
SELECT outcome FROM idem_claim('guard-1', scope => 'guard');
\c - postgres
ALTER ROLE idem_guard_tenant IN DATABASE :"db" RESET idempotency.stale_policy;
\c - idem_guard_tenant
\set SHOW_CONTEXT never
RESET idempotency.stale_policy;
SELECT outcome, status FROM idem_claim('guard-1', scope => 'guard');
SELECT status, attempts FROM idem_lookup('guard-1', 'guard');
-- a superuser's session is taken as it is (the C build lets a superuser SET them)
\c - postgres
\set SHOW_CONTEXT never
ALTER ROLE idem_guard_tenant RESET idempotency.stale_policy;
SELECT outcome FROM idem_claim('guard-2', scope => 'guard', lease => '1 ms');
SELECT pg_sleep(0.05);
SELECT outcome FROM idem_claim('guard-2', scope => 'guard');
SET idempotency.stale_policy = 'reclaim';
SELECT outcome FROM idem_claim('guard-2', scope => 'guard');
SET idempotency.max_key_length = 1000;
SELECT outcome FROM idem_claim('123456789', scope => 'guard');
RESET idempotency.stale_policy;
RESET idempotency.max_key_length;
ALTER DATABASE :"db" RESET idempotency.stale_policy;
ALTER DATABASE :"db" RESET idempotency.max_key_length;
-- read at each call: a value stored while the tenant's session is open
-- applies to it at its next call, and nothing stored is the default (255),
-- whatever spelling the catalog keeps (a quoted upper-case name, a value
-- the array quotes); a new connection, where no placeholder of the name
-- exists to make PostgreSQL store it lower-case
\c - postgres
\set SHOW_CONTEXT never
SET SESSION AUTHORIZATION idem_guard_tenant;
SELECT outcome FROM idem_claim('guard-open-1', scope => 'guard');
RESET SESSION AUTHORIZATION;
ALTER DATABASE :"db" SET "IDEMPOTENCY.MAX_KEY_LENGTH" = '11 B';
SELECT c AS stored, strpos(s.setconfig::text, '"' || c || '"') > 0 AS quoted
  FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase, unnest(s.setconfig) c
 WHERE d.datname = current_database() AND s.setrole = 0 AND c ILIKE 'idempotency.%';
SET SESSION AUTHORIZATION idem_guard_tenant;
SELECT outcome FROM idem_claim('guard-open-1', scope => 'guard');
SELECT outcome FROM idem_claim('guard-open', scope => 'guard');
RESET SESSION AUTHORIZATION;
ALTER DATABASE :"db" RESET "IDEMPOTENCY.MAX_KEY_LENGTH";
SET SESSION AUTHORIZATION idem_guard_tenant;
SELECT outcome FROM idem_claim('guard-open-1', scope => 'guard');
RESET SESSION AUTHORIZATION;
-- idempotency_settings: the database's values where ALTER DATABASE cannot
-- store them (a managed service: docs/managed.md, Settings), written by
-- the table's owner, read at each call, after any stored for the database
-- or a role; a tenant can neither write it nor override it
INSERT INTO idempotency_settings VALUES ('idempotency.stale_policy', 'hold'), ('idempotency.max_key_length', '8');
\c - idem_guard_tenant
\set SHOW_CONTEXT never
\set VERBOSITY sqlstate
INSERT INTO idempotency_settings VALUES ('idempotency.stale_policy', 'reclaim');
UPDATE idempotency_settings SET value = 'reclaim';
DELETE FROM idempotency_settings;
\set VERBOSITY default
SELECT name, value FROM idempotency_settings ORDER BY name;
SELECT outcome, status FROM idem_claim('guard-t', scope => 'guard', lease => '1 ms');
SELECT pg_sleep(0.05);
SET idempotency.stale_policy = 'reclaim';
SELECT outcome, status FROM idem_claim('guard-t', scope => 'guard');
SET idempotency.max_key_length = 1000;
SELECT outcome FROM idem_claim('123456789', scope => 'guard');
SELECT outcome FROM idem_claim('12345678', scope => 'guard');
BEGIN;
SELECT outcome FROM idem_claim('abcdefgh', scope => 'guard');
SELECT idem_complete('abcdefgh', 200, '{}', 'guard');
COMMIT;
SELECT outcome FROM idem_execute('abcdefghi', NULL, 'guard', 200, 'SELECT 1 AS one');
RESET idempotency.stale_policy;
RESET idempotency.max_key_length;
-- a value stored for the database comes first
\c - postgres
ALTER DATABASE :"db" SET idempotency.max_key_length = 9;
\c - idem_guard_tenant
\set SHOW_CONTEXT never
SELECT outcome FROM idem_claim('123456789', scope => 'guard');
-- a wrong value is an error where it is read, never the default
\c - postgres
ALTER DATABASE :"db" RESET idempotency.max_key_length;
UPDATE idempotency_settings SET value = 'hodl' WHERE name = 'idempotency.stale_policy';
\c - idem_guard_tenant
\set SHOW_CONTEXT never
SELECT outcome FROM idem_claim('guard-t', scope => 'guard');
-- and no other setting goes in it
\c - postgres
\set SHOW_CONTEXT never
\set VERBOSITY sqlstate
INSERT INTO idempotency_settings VALUES ('idempotency.lease', '1 h');
INSERT INTO idempotency_settings VALUES ('idempotency.max_key_length', '');
\set VERBOSITY default
DELETE FROM idempotency_settings;
DELETE FROM idempotency_keys WHERE scope = 'guard';
DROP ROLE idem_guard_tenant;
