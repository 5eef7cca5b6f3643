-- The SQL edition only (test/edition/sql/): which rows of
-- pg_db_role_setting an edition call reads.  The catalog is shared by every
-- database of the server, and any role may store values there: for itself
-- (ALTER ROLE ... SET), for a database it created (ALTER DATABASE ... SET,
-- CREATEDB is enough).  A call reads a row's text only when the row applies
-- to its session (for all roles or the session user, in every database or
-- this one): else one role's long value (7 to 19 MB) slowed every claim of
-- the server to 0.2-0.45 s.  Measured without a clock: the blocks this
-- transaction fetched from the catalog's TOAST table, where long values
-- live.  Each function that reads a setting (the calls below) runs beside
-- a long value of every kind that does not apply; then the same calls
-- beside one that does, which they must read (the measure's control).
\set SHOW_CONTEXT never
SELECT current_database() AS db \gset
SELECT c.reltoastrelid AS toast FROM pg_class c WHERE c.oid = 'pg_db_role_setting'::regclass \gset
CREATE ROLE idem_rows_caller LOGIN IN ROLE idempotency_app, idempotency_admin;
CREATE ROLE idem_rows_other LOGIN;
CREATE TABLE idem_rows_paid (id int);
GRANT INSERT, SELECT ON idem_rows_paid TO idem_rows_caller;
-- a value of 64 kB that does not compress below TOAST's threshold, stored
-- for: another role everywhere; another role in this database; every role
-- in another database; the caller in another database
DO $store$
DECLARE
    pad text := (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 2000) g);
BEGIN
    EXECUTE format('ALTER ROLE idem_rows_other SET idem_test.pad = %L', pad);
    EXECUTE format('ALTER ROLE idem_rows_other IN DATABASE %I SET idem_test.pad = %L', current_database(), pad);
    EXECUTE format('ALTER ROLE ALL IN DATABASE template1 SET idem_test.pad = %L', pad);
    EXECUTE format('ALTER ROLE idem_rows_caller IN DATABASE template1 SET idem_test.pad = %L', pad);
END
$store$;
SELECT count(*) AS rows_stored, bool_and(pg_column_size(setconfig) > 2000) AS each_long
  FROM pg_db_role_setting WHERE 'idem_test.pad' = ANY (SELECT split_part(c, '=', 1) FROM unnest(setconfig) c);
\c - idem_rows_caller
\set SHOW_CONTEXT never
-- every function that reads a stored setting, once, in one transaction
BEGIN;
SELECT outcome FROM idem_claim('rows-1', '{"a": 1}', 'rows');
INSERT INTO idem_rows_paid VALUES (1);
SELECT idem_checkpoint('rows-1', 'step', 'rows') IS NOT NULL AS checkpointed;
SELECT idem_heartbeat('rows-1', 'rows') IS NOT NULL AS beat;
SELECT idem_complete('rows-1', 200, '{"paid": 1}', 'rows');
SELECT outcome FROM idem_claim('rows-1', '{"a": 1}', 'rows');
SELECT outcome FROM idem_claim('rows-2', NULL, 'rows');
SELECT idem_fail('rows-2', 'rows') IS NOT NULL AS failed;
SELECT outcome FROM idem_claim('rows-3', NULL, 'rows');
SELECT idem_release('rows-3', 'rows') IS NOT NULL AS released;
SELECT outcome FROM idem_execute('rows-4', '{"a": 4}', 'rows', 201, 'INSERT INTO idem_rows_paid VALUES (4) RETURNING id');
SELECT outcome FROM idem_execute('rows-4', '{"a": 4}', 'rows', 201, 'INSERT INTO idem_rows_paid VALUES (4) RETURNING id');
SELECT outcome FROM idem_execute('rows-5', NULL, 'rows', 200, 'SELECT $1::int AS n', '5');
SELECT count(*) FROM idem_claim_batch(ARRAY['rows-6', 'rows-7'], NULL, 'rows');
SELECT count(*) FROM idem_record_batch(ARRAY['rows-6', 'rows-7'], ARRAY[200, 200], ARRAY['{}'::jsonb, '{}'], 'rows');
SELECT status FROM idem_lookup('rows-1', 'rows');
SELECT outcome FROM idem_claim('rows-9', NULL, 'rows');
SELECT idem_resolve('rows-9', 'rows', 'fail') IS NOT NULL AS resolved;
SELECT idem_expire() >= 0 AS expired;
SELECT pg_stat_get_xact_blocks_fetched(:toast) AS toast_blocks_read;
COMMIT;
-- the class: every function of the edition's whose body reads a setting is
-- called above (a function added later that reads one is listed here, and
-- this file's output changes until it is called above too)
SELECT string_agg(p.proname, ' ' ORDER BY p.proname) AS functions_reading_settings
  FROM (SELECT DISTINCT p.proname FROM pg_proc p
         WHERE p.pronamespace = (SELECT pronamespace FROM pg_proc WHERE proname = 'idem_claim')
           AND p.proname ~ '^idem_[a-z]'
           AND p.prosrc ~ 'pg_db_role_setting|idem__(check_key|setting|int_setting|lease|retention|max_key_length|max_attempts|await_result|stale_reclaim)\(') p;
-- the control: a long value that applies to the caller's sessions is read
\c - postgres
DO $store$
BEGIN
    EXECUTE format('ALTER ROLE idem_rows_caller IN DATABASE %I SET idem_test.pad = %L', current_database(),
                   (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 2000) g));
END
$store$;
\c - idem_rows_caller
BEGIN;
SELECT outcome FROM idem_claim('rows-8', NULL, 'rows');
SELECT pg_stat_get_xact_blocks_fetched(:toast) > 0 AS toast_read;
ROLLBACK;
\c - postgres
ALTER ROLE idem_rows_other RESET ALL;
ALTER ROLE idem_rows_other IN DATABASE :"db" RESET ALL;
ALTER ROLE ALL IN DATABASE template1 RESET idem_test.pad;
ALTER ROLE idem_rows_caller IN DATABASE template1 RESET ALL;
ALTER ROLE idem_rows_caller IN DATABASE :"db" RESET ALL;
DELETE FROM idempotency_keys WHERE scope = 'rows';
DROP TABLE idem_rows_paid;
DROP ROLE idem_rows_caller;
DROP ROLE idem_rows_other;
