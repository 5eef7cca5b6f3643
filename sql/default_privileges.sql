-- The installing role's default privileges (ALTER DEFAULT PRIVILEGES: on
-- Supabase's images, ALL to anon, authenticated and service_role on every
-- new table, sequence and function in public) are revoked from the
-- extension's objects on a new installation: no role but idempotency_app,
-- idempotency_admin and the owner keeps a grant it did not get from these
-- scripts.  In a database of its own (one installation a database).
SELECT current_database() AS regress_db \gset
CREATE ROLE dp_anon NOLOGIN;
CREATE DATABASE idem_default_privileges;
\c idem_default_privileges
ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO dp_anon;
ALTER DEFAULT PRIVILEGES GRANT ALL ON SEQUENCES TO dp_anon;
ALTER DEFAULT PRIVILEGES GRANT ALL ON FUNCTIONS TO dp_anon;
ALTER DEFAULT PRIVILEGES GRANT ALL ON TYPES TO dp_anon;
CREATE TABLE app_table (i int);
-- in a subtransaction, as psql's ON_ERROR_ROLLBACK runs each statement
\set ON_ERROR_ROLLBACK on
BEGIN;
CREATE EXTENSION idempotency;
COMMIT;
\set ON_ERROR_ROLLBACK off
-- the extension's objects that dp_anon was given anything on: none
SELECT count(*) AS granted_to_anon
FROM pg_depend d, LATERAL (
    SELECT relacl FROM pg_class WHERE d.classid = 'pg_class'::regclass AND oid = d.objid
    UNION ALL SELECT proacl FROM pg_proc WHERE d.classid = 'pg_proc'::regclass AND oid = d.objid
    UNION ALL SELECT typacl FROM pg_type WHERE d.classid = 'pg_type'::regclass AND oid = d.objid) o(acl),
    aclexplode(o.acl) a
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND a.grantee = 'dp_anon'::regrole;
-- what the scripts grant is kept; the application's own table keeps its
-- default privileges
SELECT has_function_privilege('idempotency_app', 'idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer)', 'EXECUTE') AS app_claims,
       has_table_privilege('idempotency_admin', 'idempotency_stats', 'SELECT') AS admin_reads_stats,
       has_table_privilege('dp_anon', 'app_table', 'SELECT') AS app_table_default_kept;
SET ROLE dp_anon;
SELECT count(*) FROM idempotency_keys;
SELECT outcome FROM idem_claim('k1');
RESET ROLE;
-- an installation updated from 0.3.0 keeps its grants, an administrator's
-- own among them
CREATE ROLE dp_reporting NOLOGIN;
CREATE DATABASE idem_default_privileges_update;
\c idem_default_privileges_update
CREATE EXTENSION idempotency VERSION '0.3.0';
GRANT SELECT ON idempotency_keys TO dp_reporting;
ALTER EXTENSION idempotency UPDATE TO '0.4.0';
SELECT has_table_privilege('dp_reporting', 'idempotency_keys', 'SELECT') AS reporting_grant_kept;
\c :regress_db
DROP DATABASE idem_default_privileges WITH (FORCE);  -- (the worker may be connected to it)
DROP DATABASE idem_default_privileges_update WITH (FORCE);
DROP ROLE dp_anon;
DROP ROLE dp_reporting;
