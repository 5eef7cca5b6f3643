/*
 * test/pgtap/security.sql: the install is hardened, and a hostile
 * search_path cannot hijack any function.
 *
 * 1. Catalog: every extension function is C (or a PL/pgSQL helper with
 *    SET search_path = pg_catalog, pg_temp), none is SECURITY DEFINER, no
 *    C function has a SET clause: those that run SQL pin search_path =
 *    pg_catalog, pg_temp in C around their own statements (idem_execute's
 *    caller's statement resolves names with the caller's path); section 3
 *    sees the pin hold at every row written; every member object belongs to the installing
 *    superuser; the extension is neither trusted nor relocatable.
 * 2. Install over a hostile schema: a role allowed to CREATE in the
 *    extension's schema (a PostgreSQL 14-era public) puts look-alike
 *    operators and functions there, then a superuser installs: nothing of
 *    theirs runs.  A pre-existing table or function of the same name makes
 *    CREATE EXTENSION fail instead of adopting it (CVE-2022-2625).
 * 3. Hostile search_path: a role granted idempotency_app owns a schema
 *    placed FIRST in its search_path (before pg_catalog) holding a table
 *    idempotency_keys, look-alike operators (=, <>, <=, >, +, - on the
 *    types the extension's SQL compares, = on its status enum and on bytea)
 *    and functions (now, nextval, to_jsonb, jsonb_build_object, sha256,
 *    ...) that log every call; a temporary table idempotency_keys shadows
 *    unqualified names too.  That role, an idempotency_admin member and a
 *    superuser then run every function on every path (new, replay,
 *    mismatch, reclaimed, renewed after expiry, fail, release, heartbeat,
 *    checkpoint, lookup, execute, resolve, expire, stats): the real table
 *    gets the rows, nothing reaches the look-alikes, no look-alike is
 *    called, and a trigger on the real table sees every row written under
 *    search_path pg_catalog, pg_temp, while an audit trigger with a SET
 *    clause of its own resolves its table under its own path, not in a
 *    temporary look-alike.  A positive control shows the same path does hijack plain,
 *    unqualified SQL.
 * 4. Privileges, exercised as real roles: a role with no grants gets 42501
 *    from everything but idem_request_hash; an idempotency_app member
 *    records keys but cannot settle, expire or read statistics; an
 *    idempotency_admin member can.
 *
 * Run with pg_prove against a database where a superuser has done
 * CREATE EXTENSION pgtap; CREATE EXTENSION idempotency;
 * Everything, roles included, goes with the final ROLLBACK.
 */
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SELECT plan(76);

/* The SQLSTATE a statement raises, or NULL */
CREATE FUNCTION pg_temp.sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.sqlstate_of(text) TO PUBLIC;

/* Extension member functions */
CREATE TEMP VIEW ext_functions AS
SELECT p.oid, p.oid::regprocedure::text AS sig, p.proname, p.proconfig, p.prosecdef,
       p.proowner, l.lanname
FROM pg_proc p
JOIN pg_language l ON l.oid = p.prolang
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency';

/* ==== 1. catalog ==== */

SELECT cmp_ok((SELECT count(*) FROM ext_functions), '>=', 16::bigint,
              'the extension has its functions (sanity check of the catalog query)');
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions
           WHERE lanname <> 'c'
             AND NOT (lanname = 'plpgsql' AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'])),
          NULL,
          'every extension function is written in C, or in PL/pgSQL with search_path pinned to pg_catalog, pg_temp (the Citus helpers)');
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions WHERE prosecdef), NULL,
          'no extension function is SECURITY DEFINER');
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions
           WHERE lanname = 'c' AND proconfig IS NOT NULL),
          NULL,
          'no C function has a SET clause: those that run SQL pin search_path = pg_catalog, pg_temp in C (section 3 sees it hold)');
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions
           WHERE proname = 'idem_request_hash' AND NOT (SELECT provolatile = 'i' AND proisstrict
                                                          FROM pg_proc WHERE oid = ext_functions.oid)),
          NULL, 'idem_request_hash(*) is IMMUTABLE STRICT: pure C, no SQL, needs no search_path');
SELECT ok((SELECT rolsuper FROM pg_roles WHERE oid = (SELECT extowner FROM pg_extension
                                                       WHERE extname = 'idempotency')),
          'the extension belongs to a superuser');
SELECT is((SELECT array_agg(pg_describe_object(d.classid, d.objid, 0) ORDER BY 1)
           FROM pg_depend d
           JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
           WHERE d.deptype = 'e'
             AND CASE d.classid
                   WHEN 'pg_proc'::regclass THEN (SELECT proowner FROM pg_proc WHERE oid = d.objid)
                   WHEN 'pg_class'::regclass THEN (SELECT relowner FROM pg_class WHERE oid = d.objid)
                   WHEN 'pg_type'::regclass THEN (SELECT typowner FROM pg_type WHERE oid = d.objid)
                 END IS DISTINCT FROM e.extowner),
          NULL, 'every member object (functions, table, sequence, view, type) belongs to the installing superuser');
SELECT is((SELECT count(*) FROM pg_depend d
           JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
           WHERE d.deptype = 'e' AND d.classid NOT IN ('pg_proc'::regclass, 'pg_class'::regclass,
                                                       'pg_type'::regclass)),
          0::bigint, 'members are only functions, relations and types (all covered by the owner check)');
SELECT ok((SELECT NOT trusted AND NOT relocatable AND superuser FROM pg_available_extension_versions
           WHERE name = 'idempotency' AND version = (SELECT extversion FROM pg_extension
                                                    WHERE extname = 'idempotency')),
          'the extension is not trusted, not relocatable, and needs a superuser to install');

/* ==== 2. installing over a hostile extension schema ==== */

CREATE ROLE tap_sec_squatter NOLOGIN;
SAVEPOINT reinstall;
DROP EXTENSION idempotency;
GRANT CREATE ON SCHEMA public TO tap_sec_squatter;
SET LOCAL ROLE tap_sec_squatter;
CREATE TABLE public.sec_install_calls (what text);
GRANT ALL ON public.sec_install_calls TO PUBLIC;
CREATE FUNCTION public.sec_text_eq(text, text) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO public.sec_install_calls VALUES ('text ='); SELECT $1 OPERATOR(pg_catalog.=) $2 $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.sec_text_eq);
CREATE FUNCTION public.sec_name_eq(name, text) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO public.sec_install_calls VALUES ('name ='); SELECT $1 OPERATOR(pg_catalog.=) $2 $$;
CREATE OPERATOR public.= (LEFTARG = name, RIGHTARG = text, FUNCTION = public.sec_name_eq);
CREATE FUNCTION public.pg_extension_config_dump(regclass, text) RETURNS void LANGUAGE sql AS
$$ INSERT INTO public.sec_install_calls VALUES ('config_dump') $$;
CREATE FUNCTION public.count(anyelement) RETURNS bigint LANGUAGE sql AS
$$ INSERT INTO public.sec_install_calls VALUES ('count'); SELECT 0::bigint $$;
RESET ROLE;
SELECT lives_ok('CREATE EXTENSION idempotency',
                'a superuser installs over look-alike operators and functions in the extension''s schema');
SELECT is((SELECT count(*) FROM public.sec_install_calls), 0::bigint,
          'the install script called none of them');
SELECT is((SELECT count(*) FROM pg_extension e, LATERAL unnest(e.extconfig) c WHERE e.extname = 'idempotency'),
          3::bigint, 'the install registered its tables and sequence with pg_catalog''s pg_extension_config_dump');
ROLLBACK TO SAVEPOINT reinstall;

/* a schema every role may create in (public before PostgreSQL 15) is refused: anyone could put an overload there */
SAVEPOINT reinstall;
DROP EXTENSION idempotency;
GRANT CREATE ON SCHEMA public TO PUBLIC;
SELECT throws_ok('CREATE EXTENSION idempotency', '42501',
                 'every role may create objects in schema public, where idempotency would be installed',
                 'CREATE EXTENSION refuses a schema PUBLIC may create in');
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
SELECT lives_ok('CREATE EXTENSION idempotency', 'and installs once PUBLIC may not');
ROLLBACK TO SAVEPOINT reinstall;

SAVEPOINT reinstall;
DROP EXTENSION idempotency;
GRANT CREATE ON SCHEMA public TO tap_sec_squatter;
SET LOCAL ROLE tap_sec_squatter;
CREATE TABLE public.idempotency_keys (scope text, key text);
RESET ROLE;
SELECT throws_ok('CREATE EXTENSION idempotency', '42P07', NULL,
                 'a pre-existing table idempotency_keys makes CREATE EXTENSION fail, never adopted');
ROLLBACK TO SAVEPOINT reinstall;

SAVEPOINT reinstall;
DROP EXTENSION idempotency;
GRANT CREATE ON SCHEMA public TO tap_sec_squatter;
SET LOCAL ROLE tap_sec_squatter;
CREATE FUNCTION public.idem_lookup(key text, scope text DEFAULT '') RETURNS SETOF record
    LANGUAGE sql AS $$ SELECT NULL::record WHERE false $$;
RESET ROLE;
SELECT throws_ok('CREATE EXTENSION idempotency', '42723', NULL,
                 'a pre-existing function idem_lookup(text, text) makes CREATE EXTENSION fail, never replaced');
ROLLBACK TO SAVEPOINT reinstall;
RELEASE SAVEPOINT reinstall;
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'idempotency'),
          (SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency'),
          'the original install is back after the rollbacks');

/* ==== 3. hostile search_path ==== */

CREATE ROLE tap_sec_app NOLOGIN IN ROLE idempotency_app;
CREATE ROLE tap_sec_admin NOLOGIN IN ROLE idempotency_admin;
CREATE SCHEMA hostile AUTHORIZATION tap_sec_app;
CREATE TABLE public.sec_payments (id serial PRIMARY KEY, amount int);
GRANT ALL ON public.sec_payments, public.sec_payments_id_seq TO idempotency_app;
/* what the calls returned, written under the hostile path, read afterwards */
CREATE TEMP TABLE sec_results (n serial, who text, step text, val text);
GRANT ALL ON sec_results, sec_results_n_seq TO PUBLIC;

SET LOCAL ROLE tap_sec_app;
CREATE TABLE hostile.calls (what text, by_role name DEFAULT current_user);
GRANT ALL ON hostile.calls TO PUBLIC;
GRANT USAGE ON SCHEMA hostile TO PUBLIC;
CREATE TABLE hostile.idempotency_keys (LIKE public.idempotency_keys);
GRANT ALL ON hostile.idempotency_keys TO PUBLIC;
CREATE SEQUENCE hostile.idempotency_token_seq;
GRANT ALL ON hostile.idempotency_token_seq TO PUBLIC;
CREATE TEMP TABLE idempotency_keys (LIKE public.idempotency_keys);
GRANT ALL ON pg_temp.idempotency_keys TO PUBLIC;

-- operators on every type pair the extension's SQL compares or adds
CREATE FUNCTION hostile.text_eq(text, text) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('text ='); SELECT true $$;
CREATE OPERATOR hostile.= (LEFTARG = text, RIGHTARG = text, FUNCTION = hostile.text_eq);
CREATE FUNCTION hostile.text_ne(text, text) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('text <>'); SELECT false $$;
CREATE OPERATOR hostile.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = hostile.text_ne);
CREATE FUNCTION hostile.bytea_eq(bytea, bytea) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('bytea ='); SELECT true $$;
CREATE OPERATOR hostile.= (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = hostile.bytea_eq);
CREATE FUNCTION hostile.int8_eq(bigint, bigint) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('bigint ='); SELECT true $$;
CREATE OPERATOR hostile.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = hostile.int8_eq);
CREATE FUNCTION hostile.status_eq(idempotency_status, idempotency_status) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('status ='); SELECT true $$;
CREATE OPERATOR hostile.= (LEFTARG = idempotency_status, RIGHTARG = idempotency_status,
                           FUNCTION = hostile.status_eq);
CREATE FUNCTION hostile.status_ne(idempotency_status, idempotency_status) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('status <>'); SELECT false $$;
CREATE OPERATOR hostile.<> (LEFTARG = idempotency_status, RIGHTARG = idempotency_status,
                            FUNCTION = hostile.status_ne);
CREATE FUNCTION hostile.ts_le(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('<='); SELECT true $$;
CREATE OPERATOR hostile.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = hostile.ts_le);
CREATE FUNCTION hostile.ts_gt(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('>'); SELECT true $$;
CREATE OPERATOR hostile.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = hostile.ts_gt);
CREATE FUNCTION hostile.ts_pl(timestamptz, interval) RETURNS timestamptz LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('ts +'); SELECT 'epoch'::timestamptz $$;
CREATE OPERATOR hostile.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = hostile.ts_pl);
CREATE FUNCTION hostile.ts_mi(timestamptz, timestamptz) RETURNS interval LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('ts -'); SELECT '0'::interval $$;
CREATE OPERATOR hostile.- (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = hostile.ts_mi);
CREATE FUNCTION hostile.iv_pl(interval, interval) RETURNS interval LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('interval +'); SELECT '0'::interval $$;
CREATE OPERATOR hostile.+ (LEFTARG = interval, RIGHTARG = interval, FUNCTION = hostile.iv_pl);
-- functions the C code (or its SQL) might call unqualified
CREATE FUNCTION hostile.nextval(regclass) RETURNS bigint LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('nextval'); SELECT 1::bigint $$;
CREATE FUNCTION hostile.nextval(text) RETURNS bigint LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('nextval(text)'); SELECT 1::bigint $$;
CREATE FUNCTION hostile.now() RETURNS timestamptz LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('now'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION hostile.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('clock_timestamp'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION hostile.to_jsonb(anyelement) RETURNS jsonb LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('to_jsonb'); SELECT '{"hijacked": true}'::jsonb $$;
CREATE FUNCTION hostile.jsonb_build_object(VARIADIC text[]) RETURNS jsonb LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('jsonb_build_object'); SELECT '{"hijacked": true}'::jsonb $$;
CREATE FUNCTION hostile.sha256(bytea) RETURNS bytea LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('sha256'); SELECT '\x00'::bytea $$;
CREATE FUNCTION hostile.digest(bytea, text) RETURNS bytea LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('digest'); SELECT '\x00'::bytea $$;
CREATE FUNCTION hostile.count(anyelement) RETURNS bigint LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('count'); SELECT 0::bigint $$;
CREATE FUNCTION hostile.pg_total_relation_size(regclass) RETURNS bigint LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('pg_total_relation_size'); SELECT 0::bigint $$;
CREATE FUNCTION hostile.set_config(text, text, boolean) RETURNS text LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('set_config'); SELECT $2 $$;
-- and in pg_temp (which is never searched for functions, but try)
CREATE FUNCTION pg_temp.now() RETURNS timestamptz LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('pg_temp.now'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION pg_temp.nextval(regclass) RETURNS bigint LANGUAGE sql AS
$$ INSERT INTO hostile.calls (what) VALUES ('pg_temp.nextval'); SELECT 1::bigint $$;
RESET ROLE;

/*
 * What search_path the extension's own statements run under: a trigger on
 * the real table records current_schemas(true) at every row it writes (the
 * C functions pin the path in C, with no SET clause to show it, so this is
 * where the pin is seen to hold: without it the hostile path shows here).
 */
CREATE TABLE public.sec_paths (op text, path text);
GRANT ALL ON public.sec_paths TO PUBLIC;
CREATE FUNCTION public.sec_path_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.sec_paths (op, path)
    SELECT TG_OP, pg_catalog.string_agg(CASE WHEN s OPERATOR(pg_catalog.~~) 'pg\_temp\_%' THEN 'pg_temp' ELSE s END, ',')
    FROM pg_catalog.unnest(pg_catalog.current_schemas(true)) AS s;
    RETURN NULL;
END
$$;
CREATE TRIGGER sec_path_log AFTER INSERT OR UPDATE OR DELETE ON public.idempotency_keys
    FOR EACH ROW EXECUTE FUNCTION public.sec_path_log();

/*
 * A trigger with a search_path of its own keeps it under the functions:
 * this audit trigger (SECURITY DEFINER, SET search_path = sec_audit,
 * pg_temp, as a DBA writes one) names its table unqualified, and a
 * temporary table of that name, a tenant's look-alike, must get nothing.
 * An override search path as the pin (PostgreSQL < 17) made PostgreSQL
 * ignore the trigger's own setting: the look-alike got every row, and a
 * trigger on it ran the tenant's code as the audit function's owner.
 */
CREATE SCHEMA sec_audit;
CREATE TABLE sec_audit.audit_rows (op text);
CREATE FUNCTION sec_audit.log_row() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = sec_audit, pg_temp AS $$
BEGIN
    INSERT INTO audit_rows (op) VALUES (TG_OP);
    RETURN NULL;
END
$$;
CREATE TRIGGER sec_audit AFTER INSERT OR UPDATE OR DELETE ON public.idempotency_keys
    FOR EACH ROW EXECUTE FUNCTION sec_audit.log_row();
CREATE TEMP TABLE audit_rows (op text);
GRANT ALL ON pg_temp.audit_rows TO PUBLIC;

/*
 * Every function on every path, under the hostile path, as the role in
 * p_role.  Runs as one DO block: pgTAP's own functions would be hijacked
 * by that path, so the block only records what the calls returned.
 */
CREATE FUNCTION pg_temp.hostile_calls(p_role text, p_admin boolean) RETURNS void
LANGUAGE plpgsql AS $outer$
DECLARE
    s text := 'sec-' || p_role;
BEGIN
    EXECUTE pg_catalog.format('SET LOCAL ROLE %I', p_role);
    PERFORM pg_catalog.set_config('search_path', 'hostile, pg_catalog, public', true);
    EXECUTE pg_catalog.format($do$
    DO $calls$
    DECLARE
        s text := %L;
        who text := %L;
        r record;
        t bigint;
    BEGIN
        -- new, checkpoint, heartbeat, complete, replay, mismatch
        SELECT * INTO r FROM idem_claim('k1', '{"a": 1}', s);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'claim k1', r.outcome);
        t := r.token;
        PERFORM idem_checkpoint('k1', 'step-1', s, t);
        PERFORM idem_heartbeat('k1', s, t, '1 hour');
        PERFORM idem_complete('k1', 201, '{"ok": true}', s, t);
        SELECT * INTO r FROM idem_claim('k1', '{"a": 1}', s);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'replay k1', r.outcome || ' ' || r.response::text);
        BEGIN
            PERFORM idem_claim('k1', '{"a": 2}', s);
            INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'mismatch k1', 'no error');
        EXCEPTION WHEN SQLSTATE 'IK001' THEN
            INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'mismatch k1', 'IK001');
        END;
        -- wrong token, and a key that does not exist
        BEGIN
            PERFORM idem_complete('k1', 200, '{}', s, -1);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'complete completed k1', SQLSTATE);
        END;
        BEGIN
            PERFORM idem_complete('nope', 200, '{}', s, 1);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'complete missing', SQLSTATE);
        END;
        -- fail retryable, then takeover
        PERFORM idem_claim('k2', NULL, s);
        PERFORM idem_fail('k2', s, NULL, 503, '{"retry": true}');
        SELECT * INTO r FROM idem_claim('k2', NULL, s);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'claim failed k2', r.outcome);
        PERFORM idem_release('k2', s);
        SELECT * INTO r FROM idem_claim('k2', NULL, s);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'claim released k2', r.outcome);
        -- a lease that ran out, and a row past expires_at
        PERFORM idem_claim('k3', NULL, s, lease => '1 ms');
        PERFORM idem_claim('k4', NULL, s, lease => '1 ms', retention => '1 ms');
        PERFORM idem_complete('k4', 200, '{}', s);
        PERFORM pg_catalog.pg_sleep(0.02);
        SELECT * INTO r FROM idem_claim('k3', NULL, s);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'claim stale k3', r.outcome);
        SELECT * INTO r FROM idem_claim('k4', NULL, s);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'claim expired k4', r.outcome);
        -- lookup, execute
        SELECT * INTO r FROM idem_lookup('k1', s);
        INSERT INTO pg_temp.sec_results (who, step, val)
        VALUES (who, 'lookup k1', r.status::text || ' ' || r.response::text || ' ' || r.recovery_point);
        SELECT * INTO r FROM idem_execute('k5', '{"b": 1}', s, 201,
            'INSERT INTO public.sec_payments (amount) VALUES ($1) RETURNING amount', 7);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'execute k5', r.outcome || ' ' || r.response::text);
        SELECT * INTO r FROM idem_execute('k5', '{"b": 1}', s, 201,
            'INSERT INTO public.sec_payments (amount) VALUES ($1) RETURNING amount', 7);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'execute k5 again', r.outcome || ' ' || r.response::text);
        -- idem_execute over a retryable failure: its general way (claim, statement, complete)
        PERFORM idem_claim('k8', '{"b": 2}', s);
        PERFORM idem_fail('k8', s);
        SELECT * INTO r FROM idem_execute('k8', '{"b": 2}', s, 201,
            'INSERT INTO public.sec_payments (amount) VALUES ($1) RETURNING amount', 8);
        INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'execute failed k8', r.outcome || ' ' || r.response::text);
        -- the operator's functions
        IF %L THEN
            PERFORM idem_claim('k6', NULL, s);
            PERFORM idem_claim('k7', NULL, s, lease => '1 ms', retention => '1 ms');
            PERFORM idem_resolve('k6', s, 'fail', 500, '{"settled": true}');
            PERFORM idem_resolve('k3', s, 'release');
            PERFORM pg_catalog.pg_sleep(0.02);
            INSERT INTO pg_temp.sec_results (who, step, val) VALUES (who, 'expire', idem_expire()::text);
            SELECT * INTO r FROM public.idempotency_stats;
            BEGIN
                PERFORM idem_stats_reset();
            EXCEPTION WHEN SQLSTATE '55000' THEN
                NULL;       -- no shared_preload_libraries: no counters to reset
            END;
        END IF;
    END
    $calls$ $do$, s, p_role, p_admin);
    PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', true);
    RESET ROLE;
END
$outer$;

SELECT lives_ok($$SELECT pg_temp.hostile_calls('tap_sec_app', false)$$,
                'an idempotency_app member runs every key function under the hostile path');
SELECT lives_ok($$SELECT pg_temp.hostile_calls('tap_sec_admin', true)$$,
                'an idempotency_admin member runs them and resolve / expire / stats under the hostile path');
SELECT lives_ok($$SELECT pg_temp.hostile_calls(current_user::text, true)$$,
                'a superuser runs them all under the hostile path');
SELECT is(current_setting('search_path'), 'public, pg_catalog', 'back on a sane search_path');
SELECT is(current_user, session_user, 'back to the session user');

SELECT is((SELECT string_agg(DISTINCT what || ' by ' || by_role, ', ') FROM hostile.calls), NULL,
          'no hostile operator or function was called, by any role');
SELECT is((SELECT array_agg(DISTINCT op ORDER BY op) FROM public.sec_paths), ARRAY['DELETE', 'INSERT', 'UPDATE'],
          'the calls inserted, updated and deleted rows of the real table (the trigger saw each kind)');
SELECT is((SELECT string_agg(DISTINCT path, ' | ') FROM public.sec_paths), 'pg_catalog,pg_temp',
          'every row the functions wrote, they wrote with search_path pinned to pg_catalog, pg_temp');
SELECT is((SELECT count(*) FROM pg_temp.audit_rows), 0::bigint,
          'an audit trigger''s own SET search_path applied under the functions: the temporary look-alike of its table got no row');
SELECT is((SELECT count(*) FROM sec_audit.audit_rows), (SELECT count(*) FROM public.sec_paths),
          'the audit trigger''s own table got a row for every row the functions wrote');
SELECT is((SELECT count(*) FROM hostile.idempotency_keys), 0::bigint, 'nothing reached the hostile table');
SELECT is((SELECT count(*) FROM pg_temp.idempotency_keys), 0::bigint, 'nothing reached the temporary table');
SELECT is((SELECT last_value FROM hostile.idempotency_token_seq), 1::bigint,
          'the hostile token sequence was never drawn from');

SELECT results_eq(
    $$SELECT who || ': ' || step || ' = ' || val FROM sec_results WHERE who = 'tap_sec_app' ORDER BY n$$,
    ARRAY['tap_sec_app: claim k1 = new',
          'tap_sec_app: replay k1 = replay {"ok": true}',
          'tap_sec_app: mismatch k1 = IK001',
          'tap_sec_app: complete completed k1 = IK002',
          'tap_sec_app: complete missing = IK004',
          'tap_sec_app: claim failed k2 = reclaimed',
          'tap_sec_app: claim released k2 = new',
          'tap_sec_app: claim stale k3 = reclaimed',
          'tap_sec_app: claim expired k4 = new',
          'tap_sec_app: lookup k1 = completed {"ok": true} step-1',
          'tap_sec_app: execute k5 = new {"amount": 7}',
          'tap_sec_app: execute k5 again = replay {"amount": 7}',
          'tap_sec_app: execute failed k8 = reclaimed {"amount": 8}'],
    'under the hostile path every outcome is the real one (app member)');
SELECT results_eq(
    $$SELECT step || ' = ' || val FROM sec_results WHERE who = 'tap_sec_admin' AND step <> 'expire' ORDER BY n$$,
    $$SELECT step || ' = ' || val FROM sec_results WHERE who = 'tap_sec_app' ORDER BY n$$,
    'the admin member saw the same outcomes');
SELECT results_eq(
    $$SELECT step || ' = ' || val FROM sec_results WHERE who = current_user::text AND step <> 'expire' ORDER BY n$$,
    $$SELECT step || ' = ' || val FROM sec_results WHERE who = 'tap_sec_app' ORDER BY n$$,
    'the superuser saw the same outcomes');
SELECT ok((SELECT val::int >= 1 FROM sec_results WHERE who = 'tap_sec_admin' AND step = 'expire'),
          'idem_expire under the hostile path expired the due rows of the real table');

SELECT results_eq(
    $$SELECT key || ' ' || status || ' ' || coalesce(response_code::text, '-') || ' ' || coalesce(response::text, '-')
      FROM public.idempotency_keys WHERE scope = 'sec-tap_sec_app' ORDER BY key$$,
    ARRAY['k1 completed 201 {"ok": true}',
          'k2 processing - -',
          'k3 processing - -',
          'k4 processing - -',
          'k5 completed 201 {"amount": 7}',
          'k8 completed 201 {"amount": 8}'],
    'the real table holds the app member''s keys, as the real operators decided');
SELECT is((SELECT count(*) FROM public.idempotency_keys
           WHERE created_at < now() - interval '1 day' OR updated_at < now() - interval '1 day'
              OR expires_at <= created_at OR (status = 'processing' AND locked_until <= created_at)),
          0::bigint, 'no timestamp came from a look-alike now() or + (no epoch, no zero intervals)');
SELECT ok((SELECT count(DISTINCT token) = count(*) AND max(token) <= (SELECT last_value FROM idempotency_token_seq)
           FROM public.idempotency_keys),
          'every token came from the real sequence (distinct, none beyond its last value)');
SELECT is((SELECT request_hash FROM public.idempotency_keys WHERE scope = 'sec-tap_sec_app' AND key = 'k1'),
          idem_request_hash('{"a": 1}'::jsonb), 'the stored request hash is the real SHA-256');
SELECT is((SELECT count(*) FROM public.sec_payments), 6::bigint,
          'idem_execute ran each role''s statements once each (2 payments for each of 3 roles)');
SELECT is((SELECT status || ' ' || response::text FROM public.idempotency_keys
           WHERE scope = 'sec-tap_sec_admin' AND key = 'k6'),
          'failed {"settled": true}', 'idem_resolve settled the real row');
SELECT is((SELECT count(*) FROM public.idempotency_keys WHERE scope = 'sec-tap_sec_admin' AND key IN ('k3', 'k7')),
          0::bigint, 'idem_resolve release and idem_expire deleted the real rows');

/* Positive control: the same path does hijack plain unqualified SQL */
INSERT INTO hostile.idempotency_keys (scope, key, status, retryable, token, created_at, updated_at, expires_at, due_at, attempts)
VALUES ('marker', 'hostile', 'completed', false, 0, now(), now(), now(), now(), 1);
INSERT INTO pg_temp.idempotency_keys (scope, key, status, retryable, token, created_at, updated_at, expires_at, due_at, attempts)
VALUES ('marker', 'temp', 'completed', false, 0, now(), now(), now(), now(), 1);
SET LOCAL ROLE tap_sec_app;
SET LOCAL search_path = hostile, pg_catalog, public;
DO $control$
BEGIN
    PERFORM 'x'::text = 'y'::text, now(), now() + interval '1 s',
            nextval('public.idempotency_token_seq'::regclass),
            'processing'::public.idempotency_status = 'completed',
            '\x01'::bytea = '\x02'::bytea, sha256('\x01'::bytea);
    INSERT INTO pg_temp.sec_results (who, step, val)
    SELECT 'control', 'unqualified table', key FROM idempotency_keys;
    PERFORM pg_catalog.set_config('search_path', 'hostile, pg_catalog, public, pg_temp', true);
    INSERT INTO pg_temp.sec_results (who, step, val)
    SELECT 'control', 'unqualified table, pg_temp last', key FROM idempotency_keys;
END
$control$;
RESET ROLE;
SET LOCAL search_path = public, pg_catalog;
SELECT is((SELECT string_agg(DISTINCT what COLLATE "C", ',' ORDER BY what COLLATE "C") FROM hostile.calls),
          'bytea =,nextval,now,sha256,status =,text =,ts +',
          'control: the same path hijacks unqualified =, +, now(), nextval(), sha256()');
SELECT results_eq(
    $$SELECT step || ': ' || val FROM sec_results WHERE who = 'control' ORDER BY n$$,
    ARRAY['unqualified table: temp', 'unqualified table, pg_temp last: hostile'],
    'control: unqualified idempotency_keys means the temporary table, or the hostile one');

/* the temporary shadow would now capture this file's own unqualified names */
DROP TABLE pg_temp.idempotency_keys;

/* ==== 4. privileges, as real roles ==== */

CREATE ROLE tap_sec_nobody NOLOGIN;
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions
           WHERE proname <> 'idem_request_hash' AND has_function_privilege('public', oid, 'EXECUTE')),
          NULL, 'PUBLIC may execute no extension function but idem_request_hash(*)');
SELECT ok(NOT has_table_privilege('public', 'idempotency_keys', 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
          AND NOT has_table_privilege('public', 'idempotency_stats', 'SELECT')
          AND NOT has_sequence_privilege('public', 'idempotency_token_seq', 'USAGE, SELECT, UPDATE'),
          'PUBLIC has no privilege on the table, the view or the sequence');

SET LOCAL ROLE tap_sec_nobody;
SELECT throws_ok($$SELECT * FROM idempotency_keys$$, '42501', NULL, 'no grants: SELECT idempotency_keys is 42501');
SELECT throws_ok($$INSERT INTO idempotency_keys (key, status, token, created_at, updated_at, expires_at)
                   VALUES ('x', 'completed', 1, now(), now(), now())$$, '42501', NULL,
                 'no grants: INSERT idempotency_keys is 42501');
SELECT throws_ok($$UPDATE idempotency_keys SET response = NULL$$, '42501', NULL,
                 'no grants: UPDATE idempotency_keys is 42501');
SELECT throws_ok($$DELETE FROM idempotency_keys$$, '42501', NULL, 'no grants: DELETE idempotency_keys is 42501');
SELECT throws_ok($$SELECT * FROM idempotency_stats$$, '42501', NULL, 'no grants: reading idempotency_stats is 42501');
SELECT is(ARRAY[
    pg_temp.sqlstate_of($$SELECT idem_claim('x')$$),
    pg_temp.sqlstate_of($$SELECT idem_complete('x', 200, '{}')$$),
    pg_temp.sqlstate_of($$SELECT idem_fail('x')$$),
    pg_temp.sqlstate_of($$SELECT idem_heartbeat('x')$$),
    pg_temp.sqlstate_of($$SELECT idem_release('x')$$),
    pg_temp.sqlstate_of($$SELECT idem_checkpoint('x', 'p')$$),
    pg_temp.sqlstate_of($$SELECT idem_lookup('x')$$),
    pg_temp.sqlstate_of($$SELECT idem_resolve('x', '', 'release')$$),
    pg_temp.sqlstate_of($$SELECT idem_expire()$$),
    pg_temp.sqlstate_of($$SELECT idem_execute('x', NULL, '', 200, 'SELECT 1')$$),
    pg_temp.sqlstate_of($$SELECT idem_execute('x', NULL, '', 200, 'SELECT $1', 1)$$),
    pg_temp.sqlstate_of($$SELECT idem_stats()$$),
    pg_temp.sqlstate_of($$SELECT idem_stats_reset()$$),
    pg_temp.sqlstate_of($$SELECT nextval('idempotency_token_seq')$$)],
    array_fill('42501'::text, ARRAY[14]),
    'no grants: every idem_* function (and the token sequence) is 42501');
SELECT lives_ok($$SELECT idem_request_hash('{"a": 1}'::jsonb), idem_request_hash('a'::text),
                         idem_request_hash('\x01'::bytea)$$,
                'no grants: idem_request_hash(jsonb / text / bytea) works');
RESET ROLE;

SET LOCAL ROLE tap_sec_app;
SELECT is((SELECT outcome FROM idem_claim('p1', '{"x": 1}', 'sec-priv')), 'new', 'app member: idem_claim');
SELECT lives_ok($$SELECT idem_checkpoint('p1', 'half', 'sec-priv'),
                         idem_heartbeat('p1', 'sec-priv')$$, 'app member: idem_checkpoint, idem_heartbeat');
SELECT lives_ok($$SELECT idem_complete('p1', 200, '{"y": 2}', 'sec-priv')$$, 'app member: idem_complete');
SELECT is((SELECT status::text FROM idem_lookup('p1', 'sec-priv')), 'completed', 'app member: idem_lookup');
SELECT lives_ok($$SELECT idem_claim('p2', NULL, 'sec-priv')$$, 'app member: claims p2');
SELECT lives_ok($$SELECT idem_fail('p2', 'sec-priv')$$, 'app member: idem_fail');
SELECT lives_ok($$SELECT idem_claim('p3', NULL, 'sec-priv')$$, 'app member: claims p3');
SELECT lives_ok($$SELECT idem_release('p3', 'sec-priv')$$, 'app member: idem_release');
SELECT lives_ok($$SELECT idem_claim('p6', NULL, 'sec-priv')$$, 'app member: claims p6 (left processing)');
SELECT is((SELECT outcome FROM idem_execute('p4', NULL, 'sec-priv', 201, 'SELECT 1 AS one')), 'new',
          'app member: idem_execute');
SELECT throws_ok($$SELECT idem_resolve('p6', 'sec-priv', 'release')$$, '42501', NULL,
                 'app member: idem_resolve is 42501');
SELECT throws_ok($$SELECT idem_expire()$$, '42501', NULL, 'app member: idem_expire is 42501');
SELECT throws_ok($$SELECT idem_stats_reset()$$, '42501', NULL, 'app member: idem_stats_reset is 42501');
SELECT throws_ok($$SELECT idem_stats()$$, '42501', NULL, 'app member: idem_stats() is 42501');
SELECT throws_ok($$SELECT * FROM idempotency_stats$$, '42501', NULL, 'app member: reading idempotency_stats is 42501');
SELECT throws_ok($$TRUNCATE idempotency_keys$$, '42501', NULL, 'app member: TRUNCATE is 42501');
SELECT throws_ok($$SELECT setval('idempotency_token_seq', 1)$$, '42501', NULL,
                 'app member: rewinding the token sequence is 42501');
SELECT throws_ok($$ALTER TABLE idempotency_keys DISABLE ROW LEVEL SECURITY$$, '42501', NULL,
                 'app member: cannot alter the table (it is not the owner)');
RESET ROLE;

SET LOCAL ROLE tap_sec_admin;
SELECT lives_ok($$SELECT idem_resolve('p6', 'sec-priv', 'release')$$, 'admin member: idem_resolve');
SELECT lives_ok($$SELECT idem_expire()$$, 'admin member: idem_expire');
SELECT lives_ok($$SELECT * FROM idempotency_stats$$, 'admin member: reads idempotency_stats');
SELECT lives_ok($$SELECT idem_stats()$$, 'admin member: idem_stats()');
SELECT ok(coalesce(pg_temp.sqlstate_of($$SELECT idem_stats_reset()$$), '00000') IN ('00000', '55000'),
          'admin member: idem_stats_reset is allowed (55000 only without shared_preload_libraries)');
SELECT is((SELECT outcome FROM idem_claim('p5', NULL, 'sec-priv')), 'new',
          'admin member: also a member of idempotency_app');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
