-- Every key function refuses (IK006) while idempotency_keys' row level
-- security is not what idempotency_row_security records, which is all a
-- pg_dump keeps of it (docs/tenants.md): a policy not recorded or recorded
-- differently would be lost or turned back by the next restore, silently.
-- The key functions are every idem_* function of the extension's schema,
-- save those listed as not reading idempotency_keys, so a new one must be
-- added here.  Called by a role the policies apply to (the SQL edition
-- checks only for such a caller: docs/managed.md).
CREATE ROLE rsr_tenant NOLOGIN IN ROLE idempotency_app, idempotency_admin;
CREATE FUNCTION pg_temp.ik006(call text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    state text;
BEGIN
    SET LOCAL ROLE rsr_tenant;
    EXECUTE call;
    RESET ROLE;
    RETURN false;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE;
    RETURN state = 'IK006';
END
$$;
CREATE TEMP TABLE key_calls (fn name, call text);
INSERT INTO key_calls VALUES
    ('idem_claim', $$SELECT idem_claim('k', '{}', 'rsr')$$),
    ('idem_claim_batch', $$SELECT idem_claim_batch(ARRAY['k'], ARRAY['{}'::jsonb], 'rsr')$$),
    ('idem_complete', $$SELECT idem_complete('k', 200, '{}', 'rsr')$$),
    ('idem_fail', $$SELECT idem_fail('k', 'rsr')$$),
    ('idem_heartbeat', $$SELECT idem_heartbeat('k', 'rsr')$$),
    ('idem_release', $$SELECT idem_release('k', 'rsr')$$),
    ('idem_checkpoint', $$SELECT idem_checkpoint('k', 'step', 'rsr')$$),
    ('idem_lookup', $$SELECT idem_lookup('k', 'rsr')$$),
    ('idem_record_batch', $$SELECT idem_record_batch(ARRAY['k'], ARRAY[200], ARRAY['{}'::jsonb], 'rsr')$$),
    ('idem_execute', $$SELECT idem_execute('k', '{}', 'rsr', 201, 'SELECT 1 AS x')$$),
    ('idem_execute', $$SELECT idem_execute('k', '{}', 'rsr', 201, 'SELECT $1::int AS x', 1)$$),
    ('idem_resolve', $$SELECT idem_resolve('k', 'rsr', 'release')$$),
    ('idem_expire', $$SELECT idem_expire()$$);
-- the idem_* functions that do not read or write idempotency_keys' rows
CREATE TEMP TABLE not_key_functions (fn name);
INSERT INTO not_key_functions VALUES ('idem_request_hash'), ('idem_hash_canonical'), ('idem_hash_number'),
    ('idem_row_storable'), ('idem_key_lock'), ('idem_stats'), ('idem_stats_databases'), ('idem_stats_reset'),
    ('idem_table_bytes'), ('idem_distribute'), ('idem_save_row_security'), ('idem_restore_row_security'),
    ('idem_row_security_restored');
SELECT p.proname AS not_covered FROM pg_proc p
 WHERE p.pronamespace = (SELECT pronamespace FROM pg_proc WHERE oid = 'idem_lookup'::regproc)
   AND p.proname ~ '^idem_[a-z]'
EXCEPT (SELECT fn FROM key_calls UNION SELECT fn FROM not_key_functions);
-- Each state, then how many calls refused with IK006 (of 13): all or none
CREATE TEMP VIEW refused AS SELECT count(*) FILTER (WHERE pg_temp.ik006(call)) AS ik006 FROM key_calls;
-- row level security off, nothing recorded: none
SELECT * FROM refused;
-- on with no policy (nobody but the owner sees a row), nothing recorded: none
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
SELECT * FROM refused;
-- a policy not recorded: all
CREATE POLICY rsr_all ON idempotency_keys USING (true);
SELECT * FROM refused;
SELECT idem_save_row_security() AS saved;
SELECT * FROM refused;
-- a recorded policy changed: its expression, its roles, its command, made restrictive
ALTER POLICY rsr_all ON idempotency_keys USING (scope <> 'x');
SELECT * FROM refused;
ALTER POLICY rsr_all ON idempotency_keys USING (true);
SELECT * FROM refused;
ALTER POLICY rsr_all ON idempotency_keys TO idempotency_admin;
SELECT * FROM refused;
ALTER POLICY rsr_all ON idempotency_keys TO PUBLIC;
SELECT * FROM refused;
BEGIN;
DROP POLICY rsr_all ON idempotency_keys;
CREATE POLICY rsr_all ON idempotency_keys FOR SELECT USING (true);
SELECT * FROM refused;
ROLLBACK;
BEGIN;
DROP POLICY rsr_all ON idempotency_keys;
CREATE POLICY rsr_all ON idempotency_keys AS RESTRICTIVE USING (true);
SELECT * FROM refused;
ROLLBACK;
-- a second policy, made and saved in one transaction: none, before and after
BEGIN;
CREATE POLICY rsr_checked ON idempotency_keys FOR INSERT WITH CHECK (key <> 'x');
SELECT idem_save_row_security() AS saved;
SELECT * FROM refused;
COMMIT;
SELECT * FROM refused;
-- a recorded row changed by hand, or deleted: all
UPDATE idempotency_row_security SET check_expr = '(key <> ''y''::text)' WHERE policy = 'rsr_checked';
ALTER POLICY rsr_checked ON idempotency_keys WITH CHECK (key <> 'x');  -- (the C build looks again)
SELECT * FROM refused;
DELETE FROM idempotency_row_security WHERE policy = 'rsr_checked';
ALTER POLICY rsr_checked ON idempotency_keys WITH CHECK (key <> 'x');
SELECT * FROM refused;
-- a policy dropped but still recorded: all, as before
SELECT idem_save_row_security() AS saved;
DROP POLICY rsr_checked ON idempotency_keys;
SELECT * FROM refused;
SELECT idem_save_row_security() AS saved;
-- constants and names that the session's settings would write otherwise,
-- saved and checked under those settings and under the defaults: none
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = sql_standard;
SET TimeZone = 'Asia/Kolkata';
SET extra_float_digits = 3;
SET quote_all_identifiers = on;
SET bytea_output = escape;
SET search_path = pg_temp, public, pg_catalog;
BEGIN;
ALTER POLICY rsr_all ON idempotency_keys
    USING (created_at > '2020-01-02 03:04:05+00'::timestamptz AND '2021-03-04'::date < '2030-01-01'
           AND interval '1 day 2 hours' > interval '1 hour' AND 0.1::float8 < 1.5 AND "key" <> 'a\b'
           AND request_hash IS DISTINCT FROM '\xdeadbeef'::bytea);
SELECT idem_save_row_security() AS saved;
COMMIT;
SELECT * FROM refused;
SELECT using_expr FROM idempotency_row_security;
RESET DateStyle;
RESET IntervalStyle;
RESET TimeZone;
RESET extra_float_digits;
RESET quote_all_identifiers;
RESET bytea_output;
RESET search_path;
ALTER POLICY rsr_all ON idempotency_keys
    USING (created_at > '2020-01-02 03:04:05+00'::timestamptz AND '2021-03-04'::date < '2030-01-01'
           AND interval '1 day 2 hours' > interval '1 hour' AND 0.1::float8 < 1.5 AND "key" <> 'a\b'
           AND request_hash IS DISTINCT FROM '\xdeadbeef'::bytea);
SELECT * FROM refused;
-- off with policies recorded: all, until they are deleted
ALTER TABLE idempotency_keys DISABLE ROW LEVEL SECURITY;
SELECT * FROM refused;
DELETE FROM idempotency_row_security;
DROP POLICY rsr_all ON idempotency_keys;
SELECT * FROM refused;
DROP ROLE rsr_tenant;
