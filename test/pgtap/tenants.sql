/*
 * test/pgtap/tenants.sql: tenant isolation with row level security, the
 * recipe of docs/tenants.md.
 *
 * Each tenant role (a member of idempotency_app) is bound to the scope
 * named like itself by a policy; idempotency_admin sees every row (for
 * operators and the background worker, which runs as idempotency_admin).
 * The key functions are SECURITY INVOKER, so the policies apply to their
 * SPI statements as to plain SQL.  Tenant A then:
 *   - works end to end in its own scope (claim, checkpoint, heartbeat,
 *     complete, replay, lookup, mismatch, fail, release, execute);
 *   - cannot read B's keys (idem_lookup, SELECT, pg_stats);
 *   - cannot probe them: claiming an existing key of B's, in any state,
 *     answers exactly what claiming a missing one does (42501), as do the
 *     holder calls (IK004, even with B's real token) and row_security = off;
 *   - cannot squat (no row of B's scope is ever created);
 *   - cannot change B's keys through any function or through the table
 *     (UPDATE, DELETE, INSERT, ON CONFLICT DO UPDATE, MERGE, moving its own
 *     row into B's scope, TRUNCATE, ALTER TABLE, DROP POLICY, SET ROLE);
 *   - B's rows are byte for byte as they were, checked as superuser.
 * Plan cache: every statement the extension prepares is first planned and
 * run by a superuser (who bypasses RLS), then reused by the tenants in the
 * same backend; the policies must still apply (PostgreSQL replans a saved
 * plan that depends on RLS when the role changes), and the other way round.
 * FORCE ROW LEVEL SECURITY changes nothing for the owner (a superuser);
 * without the admin policy, expiry by idempotency_admin skips tenant rows.
 * A role outside idempotency_app granted SELECT sees nothing (no policy,
 * default deny).  The variant with a mapping table (many scopes per role)
 * is checked too, and one whose policy calls a helper with a search_path of
 * its own (which must hold inside the key functions).  A tenant cannot LOCK the whole table in a mode that
 * would block other tenants' claims, directly or through a view.
 *
 * Run with pg_prove against a database where a superuser has done
 * CREATE EXTENSION pgtap; CREATE EXTENSION idempotency;
 * Roles, policies and rows all go with the final ROLLBACK.
 */
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SELECT plan(82);

/* ---- helpers ---- */

/* The error a statement raises, with the key k masked, or 'no error' */
CREATE FUNCTION pg_temp.err(stmt text, k text DEFAULT NULL) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text;
    d text;
    h text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN replace(SQLSTATE || ': ' || m || ' | ' || coalesce(d, '') || ' | ' || coalesce(h, ''),
                   coalesce(k, E'\x01'), '<key>');
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.err(text, text) TO PUBLIC;

/* Rows changed by a DML statement given as text (0 when RLS hides them all) */
CREATE FUNCTION pg_temp.rows_changed(stmt text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE stmt;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.rows_changed(text) TO PUBLIC;

/* Every row of a scope as text: the superuser's view, for before / after */
CREATE FUNCTION pg_temp.scope_rows(s text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(t::text, E'\n' ORDER BY t.key), '')
    FROM public.idempotency_keys t WHERE t.scope = s
$$;

CREATE TEMP TABLE tokens (k text PRIMARY KEY, token bigint);
GRANT ALL ON tokens TO PUBLIC;

/* ---- the recipe (docs/tenants.md) ---- */

ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
    USING (scope = current_user) WITH CHECK (scope = current_user);
CREATE POLICY admin_all ON idempotency_keys TO idempotency_admin
    USING (true) WITH CHECK (true);
DO $$ BEGIN PERFORM idem_save_row_security(); END $$;
CREATE ROLE tap_tenant_a NOLOGIN IN ROLE idempotency_app;
CREATE ROLE tap_tenant_b NOLOGIN IN ROLE idempotency_app;
CREATE ROLE tap_tenant_ops NOLOGIN IN ROLE idempotency_admin;
CREATE ROLE tap_tenant_outsider NOLOGIN;
GRANT SELECT ON idempotency_keys TO tap_tenant_outsider;
CREATE TABLE public.tenant_payments (id serial PRIMARY KEY, scope text NOT NULL DEFAULT current_user,
                                     amount int);
GRANT ALL ON public.tenant_payments, public.tenant_payments_id_seq TO idempotency_app;
/* a side effect no rollback undoes: idem_execute must not start a statement in a scope it may not use */
CREATE SEQUENCE public.tenant_probe;
GRANT ALL ON public.tenant_probe TO idempotency_app;

/* ---- plan cache: a superuser (no RLS) plans and runs every statement first ---- */

SELECT lives_ok($$
    DO $warm$
    DECLARE t bigint;
    BEGIN
        SELECT token INTO t FROM idem_claim('w1', NULL, 'warm');
        PERFORM idem_heartbeat('w1', 'warm', t);
        PERFORM idem_checkpoint('w1', 'p', 'warm', t);
        PERFORM idem_complete('w1', 200, '{}', 'warm', t);
        PERFORM idem_claim('w1', NULL, 'warm');
        PERFORM idem_claim('w2', NULL, 'warm');
        PERFORM idem_fail('w2', 'warm');
        PERFORM idem_claim('w2', NULL, 'warm');
        PERFORM idem_release('w2', 'warm');
        PERFORM idem_claim('w3', NULL, 'warm', lease => '1 ms', retention => '1 ms');
        PERFORM idem_claim('w4', NULL, 'warm', lease => '1 ms');
        PERFORM idem_claim('w5', NULL, 'warm');
        PERFORM idem_claim('w6', NULL, 'warm');
        PERFORM pg_sleep(0.02);
        PERFORM idem_claim('w3', NULL, 'warm');
        PERFORM idem_claim('w4', NULL, 'warm');
        PERFORM idem_resolve('w5', 'warm', 'fail');
        PERFORM idem_resolve('w6', 'warm', 'release');
        PERFORM idem_expire(1);
        PERFORM idem_execute('w7', NULL, 'warm', 201,
            'INSERT INTO public.tenant_payments (amount) VALUES ($1) RETURNING amount', 1);
    END
    $warm$ $$, 'a superuser runs every statement (plans cached while RLS is bypassed)');

/* ---- B's keys, in every state, made by B ---- */

SET LOCAL ROLE tap_tenant_b;
DO $fixtures$
BEGIN
    PERFORM idem_claim('b-done', '{"amount": 1}', 'tap_tenant_b');
    PERFORM idem_complete('b-done', 201, '{"secret": "b"}', 'tap_tenant_b');
    INSERT INTO tokens SELECT 'b-open', token FROM idem_claim('b-open', '{"amount": 2}', 'tap_tenant_b', lease => '1 hour');
    INSERT INTO tokens SELECT 'b-stale', token FROM idem_claim('b-stale', '{"amount": 3}', 'tap_tenant_b', lease => '1 ms');
    INSERT INTO tokens SELECT 'b-failed', token FROM idem_claim('b-failed', NULL, 'tap_tenant_b');
    PERFORM idem_fail('b-failed', 'tap_tenant_b', NULL, 503, '{"retry": true}');
    INSERT INTO tokens SELECT 'b-final', token FROM idem_claim('b-final', NULL, 'tap_tenant_b');
    PERFORM idem_fail('b-final', 'tap_tenant_b', NULL, 402, '{"declined": true}', retryable => false);
    INSERT INTO tokens SELECT 'b-expired', token
    FROM idem_claim('b-expired', NULL, 'tap_tenant_b', lease => '1 ms', retention => '1 ms');
    PERFORM idem_complete('b-expired', 200, '{"old": true}', 'tap_tenant_b');
    PERFORM pg_sleep(0.02);
END
$fixtures$;
RESET ROLE;
SELECT is((SELECT string_agg(key || ':' || status, ',' ORDER BY key) FROM idempotency_keys WHERE scope = 'tap_tenant_b'),
          'b-done:completed,b-expired:completed,b-failed:failed,b-final:failed,b-open:processing,b-stale:processing',
          'fixture: B has a key in every state (b-stale''s lease and b-expired''s retention have run out)');
SELECT lives_ok($$SELECT idem_lookup('b-done', 'tap_tenant_b'), idem_claim('b-done', '{"amount": 1}', 'tap_tenant_b')$$,
                'the superuser also reads B''s keys through the cached plans');
SELECT is((SELECT response FROM idem_lookup('b-done', 'tap_tenant_b')), '{"secret": "b"}'::jsonb,
          'the superuser sees B''s key (bypasses RLS, also under FORCE)');
SELECT pg_temp.scope_rows('tap_tenant_b') AS b_before \gset

/* ==== tenant A in its own scope ==== */

SET LOCAL ROLE tap_tenant_a;
SELECT is((SELECT outcome FROM idem_claim('a-1', '{"amount": 9}', 'tap_tenant_a')), 'new', 'A claims in its scope');
SELECT lives_ok($$SELECT idem_checkpoint('a-1', 'charged', 'tap_tenant_a')$$, 'A checkpoints its key');
SELECT lives_ok($$SELECT idem_heartbeat('a-1', 'tap_tenant_a')$$, 'A extends its lease');
SELECT lives_ok($$SELECT idem_complete('a-1', 201, '{"mine": true}', 'tap_tenant_a')$$, 'A completes its key');
SELECT is((SELECT outcome || ' ' || response_code || ' ' || response FROM idem_claim('a-1', '{"amount": 9}', 'tap_tenant_a')),
          'replay 201 {"mine": true}', 'A replays its key');
SELECT is((SELECT status || ' ' || recovery_point FROM idem_lookup('a-1', 'tap_tenant_a')), 'completed charged',
          'A looks its key up');
SELECT throws_ok($$SELECT idem_claim('a-1', '{"amount": 10}', 'tap_tenant_a')$$, 'IK001', NULL,
                 'A gets IK001 for a different request under its own key');
SELECT is((SELECT outcome FROM idem_claim('a-2', NULL, 'tap_tenant_a')), 'new', 'A claims a second key');
SELECT lives_ok($$SELECT idem_fail('a-2', 'tap_tenant_a')$$, 'A fails a key');
SELECT is((SELECT outcome FROM idem_claim('a-2', NULL, 'tap_tenant_a')), 'reclaimed', 'A takes its failed key over');
SELECT lives_ok($$SELECT idem_release('a-2', 'tap_tenant_a')$$, 'A releases its key');
SELECT is((SELECT outcome || ' ' || response FROM idem_execute('a-3', NULL, 'tap_tenant_a', 201,
               'INSERT INTO public.tenant_payments (amount) VALUES ($1) RETURNING amount', 5)),
          'new {"amount": 5}', 'A runs idem_execute in its scope');
SELECT throws_ok($$SELECT idem_claim('a-default')$$, '42501', NULL,
                 'A cannot use the default scope '''' (it must pass its own)');

/* ==== read: nothing of B's ==== */

SELECT is((SELECT count(*) FROM unnest(ARRAY['b-done', 'b-open', 'b-stale', 'b-failed', 'b-final', 'b-expired']) k,
           LATERAL idem_lookup(k, 'tap_tenant_b')), 0::bigint, 'idem_lookup of any of B''s keys returns no row');
SELECT is((SELECT array_agg(DISTINCT scope) FROM idempotency_keys), ARRAY['tap_tenant_a'],
          'SELECT on the table shows A''s rows only');
SELECT is((SELECT count(*) FROM (SELECT FROM idempotency_keys WHERE key LIKE 'b-%' OR scope = 'tap_tenant_b' FOR UPDATE) s), 0::bigint,
          'SELECT ... FOR UPDATE finds none of B''s rows');
RESET ROLE;
ANALYZE idempotency_keys;
SELECT ok((SELECT count(*) FROM pg_stats WHERE tablename = 'idempotency_keys') > 0, 'control: the superuser sees pg_stats');
SET LOCAL ROLE tap_tenant_a;
SELECT is((SELECT count(*) FROM pg_stats WHERE tablename = 'idempotency_keys'), 0::bigint,
          'A sees no column statistics of the table (pg_stats hides RLS tables)');

/* ==== probe: an existing key of B's, in any state, answers like a missing one ==== */

SELECT count(*) AS key_locks_before FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' \gset

SELECT is((SELECT array_agg(DISTINCT pg_temp.err(format('SELECT idem_claim(%L, %L, %L)', k, r, 'tap_tenant_b'), k))
           FROM unnest(ARRAY['b-done', 'b-open', 'b-stale', 'b-failed', 'b-final', 'b-expired', 'b-nothing']) k,
                unnest(ARRAY[NULL, '{"amount": 1}', '{"amount": 2}', '{"amount": 3}']) r),
          ARRAY['42501: new row violates row-level security policy for table "idempotency_keys" |  | '],
          'idem_claim in B''s scope: one and the same 42501 for every key, existing (any state) or not, any request');
SELECT is((SELECT array_agg(DISTINCT pg_temp.err(format('SELECT idem_claim(%L, NULL, %L, wait => false)', k, 'tap_tenant_b'), k))
           FROM unnest(ARRAY['b-done', 'b-open', 'b-stale', 'b-nothing']) k),
          ARRAY['42501: new row violates row-level security policy for table "idempotency_keys" |  | '],
          'the same with wait => false');
SELECT is((SELECT array_agg(DISTINCT pg_temp.err(format('SELECT idem_execute(%L, NULL, %L, 201, %L)', k, 'tap_tenant_b',
                                                       'INSERT INTO public.tenant_payments (amount) VALUES (1) RETURNING id'), k))
           FROM unnest(ARRAY['b-done', 'b-open', 'b-nothing']) k),
          ARRAY['42501: new row violates row-level security policy for table "idempotency_keys" |  | '],
          'the same for idem_execute (and its statement never ran)');
SELECT is((SELECT array_agg(DISTINCT pg_temp.err(format('SELECT idem_execute(%L, NULL, %L, 201, %L)', k, 'tap_tenant_b',
                                                       'SELECT pg_catalog.nextval(''public.tenant_probe'') AS n'), k))
           FROM unnest(ARRAY['b-done', 'b-open', 'b-nothing']) k),
          ARRAY['42501: new row violates row-level security policy for table "idempotency_keys" |  | '],
          'the same for idem_execute of a statement with an effect no rollback undoes');
SELECT is((SELECT is_called FROM public.tenant_probe), false,
          'that statement never started (the sequence was never advanced): the scope is checked first');
SELECT is((SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'), :key_locks_before::bigint,
          'A''s refused claims of B''s keys left no key lock held (their lock went with the failed statement)');
SELECT is((SELECT array_agg(DISTINCT replace(pg_temp.err(replace(c, '$T', coalesce(t.token, 1)::text), k.k), f, '<fn>'))
           FROM unnest(ARRAY['b-done', 'b-open', 'b-stale', 'b-failed', 'b-final', 'b-expired', 'b-nothing']) k(k)
           LEFT JOIN tokens t ON t.k = k.k,
           LATERAL (VALUES ('idem_complete', format('SELECT idem_complete(%L, 200, %L, %L, $T)', k.k, '{"evil": 1}', 'tap_tenant_b')),
                           ('idem_fail', format('SELECT idem_fail(%L, %L, $T, 500, %L, false)', k.k, 'tap_tenant_b', '{"evil": 1}')),
                           ('idem_heartbeat', format('SELECT idem_heartbeat(%L, %L, $T, %L)', k.k, 'tap_tenant_b', '1 day')),
                           ('idem_release', format('SELECT idem_release(%L, %L, $T)', k.k, 'tap_tenant_b')),
                           ('idem_checkpoint', format('SELECT idem_checkpoint(%L, %L, %L, $T)', k.k, 'evil', 'tap_tenant_b')),
                           ('idem_complete', format('SELECT idem_complete(%L, 200, NULL, %L)', k.k, 'tap_tenant_b')))
                   AS calls(f, c)),
          ARRAY['IK004: idempotency key does not exist | No key "<key>" in scope "tap_tenant_b" (<fn>). | It may have expired, been released, or been claimed in another scope.'],
          'complete / fail / heartbeat / release / checkpoint of B''s keys, with B''s real token or none: one IK004, as for a missing key');
SET LOCAL row_security = off;
SELECT is((SELECT array_agg(DISTINCT pg_temp.err(format('SELECT * FROM idem_lookup(%L, %L)', k, 'tap_tenant_b'), k))
           FROM unnest(ARRAY['b-done', 'b-nothing']) k),
          ARRAY['42501: query would be affected by row-level security policy for table "idempotency_keys" |  | '],
          'row_security = off does not bypass RLS: the same 42501 for an existing and a missing key');
SET LOCAL row_security = on;
/* a rejected claim leaves nothing behind that another claimer of B's key could wait for */
SELECT is((SELECT array_agg(locktype || ' ' || mode) FROM pg_locks
           WHERE pid = pg_backend_pid() AND locktype IN ('tuple', 'spectoken', 'page')),
          NULL, 'after the rejected claims A holds no tuple or speculative-insertion lock');
SELECT is((SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'), :key_locks_before::bigint,
          'and no key lock beyond those of its own claims before');

/* ==== change through the table ==== */

SELECT is(pg_temp.rows_changed($$UPDATE idempotency_keys SET response = '{"evil": 1}', status = 'completed'
                                 WHERE scope = 'tap_tenant_b'$$), 0::bigint, 'UPDATE of B''s rows changes none');
SELECT is(pg_temp.rows_changed($$DELETE FROM idempotency_keys WHERE scope = 'tap_tenant_b' OR key LIKE 'b-%'$$), 0::bigint,
          'DELETE of B''s rows deletes none');
SELECT throws_ok($$INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
                   VALUES ('tap_tenant_b', 'b-squat', 'completed', 1, now(), now(), now() + '1 day')$$, '42501', NULL,
                 'INSERT into B''s scope is 42501');
SELECT is((SELECT array_agg(DISTINCT pg_temp.err(format(
               $$INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
                 VALUES ('tap_tenant_b', %L, 'completed', 1, now(), now(), now() + '1 day')
                 ON CONFLICT (scope, key) DO UPDATE SET response = '{"evil": 1}'$$, k), k))
           FROM unnest(ARRAY['b-done', 'b-nothing']) k),
          ARRAY['42501: new row violates row-level security policy for table "idempotency_keys" |  | '],
          'INSERT ... ON CONFLICT DO UPDATE into B''s scope: the same 42501 whether the key exists or not');
SELECT is((SELECT array_agg(DISTINCT pg_temp.err(format(
               $$UPDATE idempotency_keys SET scope = 'tap_tenant_b', key = %L WHERE scope = 'tap_tenant_a' AND key = 'a-1'$$, k), k))
           FROM unnest(ARRAY['b-done', 'b-nothing']) k),
          ARRAY['42501: new row violates row-level security policy for table "idempotency_keys" |  | '],
          'moving A''s own row into B''s scope: 42501, never a unique violation revealing B''s key');
SELECT is((SELECT array_agg(DISTINCT pg_temp.err(format(
               $$MERGE INTO idempotency_keys t
                 USING (SELECT 'tap_tenant_b'::text AS scope, %L::text AS key) s ON t.scope = s.scope AND t.key = s.key
                 WHEN MATCHED THEN UPDATE SET response = '{"evil": 1}'
                 WHEN NOT MATCHED THEN INSERT (scope, key, status, token, created_at, updated_at, expires_at)
                      VALUES (s.scope, s.key, 'completed', 1, now(), now(), now())$$, k), k))
           FROM unnest(ARRAY['b-done', 'b-nothing']) k),
          ARRAY['42501: new row violates row-level security policy for table "idempotency_keys" |  | '],
          'MERGE into B''s scope: the same 42501 whether the key exists or not');
SELECT throws_ok($$TRUNCATE idempotency_keys$$, '42501', NULL, 'TRUNCATE is 42501');
SELECT throws_ok($$ALTER TABLE idempotency_keys DISABLE ROW LEVEL SECURITY$$, '42501', NULL,
                 'A cannot disable row level security');
SELECT throws_ok($$DROP POLICY tenant_scope ON idempotency_keys$$, '42501', NULL, 'A cannot drop the policy');
SELECT throws_ok($$CREATE POLICY a_sees_all ON idempotency_keys TO tap_tenant_a USING (true)$$, '42501', NULL,
                 'A cannot add a policy');
RESET ROLE;

/* ==== B is untouched, and still works ==== */

SELECT is(pg_temp.scope_rows('tap_tenant_b'), :'b_before', 'B''s rows are exactly as before A''s attempts (checked as superuser)');
SELECT is((SELECT count(*) FROM idempotency_keys WHERE key IN ('b-nothing', 'b-squat', 'a-default')), 0::bigint,
          'no row was squatted in B''s scope (nor in the default scope)');
SELECT is((SELECT string_agg(CASE WHEN scope = current_user THEN 'superuser' ELSE scope END || ':' || amount, ',' ORDER BY id)
           FROM tenant_payments), 'superuser:1,tap_tenant_a:5',
          'idem_execute in B''s scope never ran its statement (only A''s own payment exists)');
SET LOCAL ROLE tap_tenant_b;
SELECT is((SELECT outcome || ' ' || response FROM idem_claim('b-done', '{"amount": 1}', 'tap_tenant_b')),
          'replay {"secret": "b"}', 'B replays its key after A (same backend, plans reused)');
SELECT is((SELECT outcome FROM idem_claim('b-nothing', NULL, 'tap_tenant_b')), 'new',
          'B claims the key A tried to squat: new');
SELECT lives_ok(format('SELECT idem_heartbeat(%L, %L, %s)', 'b-open', 'tap_tenant_b',
                       (SELECT token FROM tokens WHERE k = 'b-open')),
                'B still holds b-open with its token');
SELECT is((SELECT array_agg(DISTINCT scope) FROM idempotency_keys), ARRAY['tap_tenant_b'], 'B sees only its rows');
SELECT is((SELECT count(*) FROM idem_lookup('a-1', 'tap_tenant_a')), 0::bigint, 'B cannot look up A''s key either');
RESET ROLE;
SELECT is((SELECT count(*) FROM idem_lookup('a-1', 'tap_tenant_a')), 1::bigint,
          'the superuser sees A''s key again after the tenants ran (plans replanned for the role)');

/* ==== operators, the worker, FORCE ==== */

SELECT ok((SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE oid = 'idempotency_keys'::regclass),
          'row level security is enabled and forced');
SELECT is((SELECT count(DISTINCT scope) FROM idempotency_keys WHERE scope LIKE 'tap_tenant_%'), 2::bigint,
          'the owner (a superuser) still sees every scope under FORCE');
SET LOCAL ROLE tap_tenant_ops;
SELECT is((SELECT count(DISTINCT scope) FROM idempotency_keys WHERE scope LIKE 'tap_tenant_%'), 2::bigint,
          'an idempotency_admin member sees every scope (admin_all)');
SELECT is((SELECT count(*) FROM idem_lookup('b-done', 'tap_tenant_b')), 1::bigint, 'an operator looks up B''s key');
RESET ROLE;

SAVEPOINT no_admin_policy;
DROP POLICY admin_all ON idempotency_keys;
DO $$ BEGIN PERFORM idem_save_row_security(); END $$;
SET LOCAL ROLE idempotency_admin;          -- as the background worker runs its batches
SELECT is(idem_expire(), 0::bigint, 'without the admin policy, expiry as idempotency_admin sees no tenant row');
RESET ROLE;
SELECT is((SELECT count(*) FROM idempotency_keys WHERE scope = 'tap_tenant_b' AND key IN ('b-stale', 'b-expired')), 2::bigint,
          'so B''s stale and expired rows stay (the reason for admin_all)');
ROLLBACK TO SAVEPOINT no_admin_policy;
RELEASE SAVEPOINT no_admin_policy;

SET LOCAL ROLE idempotency_admin;          -- as the background worker runs its batches
SELECT cmp_ok(idem_expire(), '>=', 2::bigint, 'with admin_all, expiry as idempotency_admin handles tenant rows');
RESET ROLE;
SELECT is((SELECT string_agg(key || ':' || status, ',' ORDER BY key) FROM idempotency_keys
           WHERE scope = 'tap_tenant_b' AND key IN ('b-stale', 'b-expired')),
          'b-stale:failed', 'B''s stale claim became takeover-ready and its expired key was deleted');
SET LOCAL ROLE tap_tenant_ops;
SELECT lives_ok($$SELECT idem_resolve('b-open', 'tap_tenant_b', 'fail', 500, '{"settled": true}')$$,
                'an operator settles B''s stuck key');
RESET ROLE;
SET LOCAL ROLE tap_tenant_outsider;
SELECT is((SELECT count(*) FROM idempotency_keys), 0::bigint,
          'a role outside idempotency_app, granted SELECT, sees no row (no policy applies: default deny)');
RESET ROLE;

/* ==== variant: a mapping table, many scopes per role ==== */

CREATE ROLE tap_tenant_m NOLOGIN IN ROLE idempotency_app;
CREATE TABLE public.idempotency_tenant_scopes (
    role  name NOT NULL,
    scope text NOT NULL,
    PRIMARY KEY (role, scope)
);
REVOKE ALL ON public.idempotency_tenant_scopes FROM PUBLIC;
GRANT SELECT ON public.idempotency_tenant_scopes TO idempotency_app;
ALTER TABLE public.idempotency_tenant_scopes ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_scopes ON public.idempotency_tenant_scopes TO idempotency_app
    USING (role = current_user);
CREATE POLICY admin_all ON public.idempotency_tenant_scopes TO idempotency_admin USING (true);
INSERT INTO public.idempotency_tenant_scopes VALUES
    ('tap_tenant_a', 'tap_tenant_a'), ('tap_tenant_b', 'tap_tenant_b'), ('tap_tenant_m', 'm-1'), ('tap_tenant_m', 'm-2');
DROP POLICY tenant_scope ON idempotency_keys;
CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
    USING (EXISTS (SELECT FROM public.idempotency_tenant_scopes m
                   WHERE m.role = current_user AND m.scope = idempotency_keys.scope))
    WITH CHECK (EXISTS (SELECT FROM public.idempotency_tenant_scopes m
                        WHERE m.role = current_user AND m.scope = idempotency_keys.scope));
DO $$ BEGIN PERFORM idem_save_row_security(); END $$;

SET LOCAL ROLE tap_tenant_m;
SELECT is((SELECT outcome FROM idem_claim('m-key', NULL, 'm-1')) || ' ' ||
          (SELECT outcome FROM idem_claim('m-key', NULL, 'm-2')), 'new new',
          'mapping: a role claims in each of its scopes');
SELECT is((SELECT array_agg(DISTINCT scope ORDER BY scope) FROM idempotency_keys), ARRAY['m-1', 'm-2'],
          'mapping: it sees the rows of its scopes only');
SELECT throws_ok($$SELECT idem_claim('b-done', '{"amount": 1}', 'tap_tenant_b')$$, '42501',
                 'new row violates row-level security policy for table "idempotency_keys"',
                 'mapping: claiming in an unmapped scope is 42501');
SELECT throws_ok(format('SELECT idem_complete(%L, 200, NULL, %L, %s)', 'b-nothing', 'tap_tenant_b', 1), 'IK004', NULL,
                 'mapping: holder calls on another scope''s keys are IK004');
SELECT is((SELECT array_agg(scope ORDER BY scope) FROM public.idempotency_tenant_scopes), ARRAY['m-1', 'm-2'],
          'mapping: a role reads its own mapping rows only');
SELECT throws_ok($$INSERT INTO public.idempotency_tenant_scopes VALUES ('tap_tenant_m', 'tap_tenant_b')$$, '42501', NULL,
                 'mapping: a role cannot map itself to another scope');
RESET ROLE;
SET LOCAL ROLE tap_tenant_a;
SELECT is((SELECT count(*) FROM idem_lookup('m-key', 'm-1')), 0::bigint, 'mapping: A does not see tap_tenant_m''s scopes');
SELECT is((SELECT outcome FROM idem_claim('a-1', '{"amount": 9}', 'tap_tenant_a')), 'replay',
          'mapping: A still replays its own key');
RESET ROLE;

/*
 * ==== variant: a policy helper with a search_path of its own ====
 * The policy calls a SECURITY DEFINER helper, SET search_path =
 * tap_tenant_app, pg_temp, that names its mapping table unqualified, and A
 * makes a temporary look-alike that maps A to B's scope.  The helper's own
 * path must hold inside the key functions too (they set theirs as a SET
 * clause does; an override search path ignored the helper's, and A read,
 * claimed and completed B's keys).
 */
CREATE SCHEMA tap_tenant_app;
CREATE TABLE tap_tenant_app.tenant_scopes (role name, scope text, PRIMARY KEY (role, scope));
INSERT INTO tap_tenant_app.tenant_scopes SELECT role, scope FROM public.idempotency_tenant_scopes;
GRANT USAGE ON SCHEMA tap_tenant_app TO PUBLIC;
CREATE FUNCTION tap_tenant_app.scope_ok(r name, s text) RETURNS boolean LANGUAGE sql STABLE
    SECURITY DEFINER SET search_path = tap_tenant_app, pg_temp
    AS $$ SELECT EXISTS (SELECT FROM tenant_scopes WHERE role = r AND scope = s) $$;
DROP POLICY tenant_scope ON idempotency_keys;
CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
    USING (tap_tenant_app.scope_ok(current_user, scope))
    WITH CHECK (tap_tenant_app.scope_ok(current_user, scope));
DO $$ BEGIN PERFORM idem_save_row_security(); END $$;
/*
 * And a restrictive policy whose function has no SET clause records the
 * path it runs under: the key functions' own, for reads as for writes.
 */
CREATE TABLE tap_tenant_app.seen_paths (path text);
GRANT INSERT ON tap_tenant_app.seen_paths TO idempotency_app;
CREATE FUNCTION tap_tenant_app.path_probe() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO tap_tenant_app.seen_paths (path)
    SELECT pg_catalog.string_agg(CASE WHEN s OPERATOR(pg_catalog.~~) 'pg\_temp\_%' THEN 'pg_temp' ELSE s END, ',')
    FROM pg_catalog.unnest(pg_catalog.current_schemas(true)) AS s;
    RETURN true;
END
$$;
CREATE POLICY path_probe ON idempotency_keys AS RESTRICTIVE TO idempotency_app
    USING (tap_tenant_app.path_probe());
DO $$ BEGIN PERFORM idem_save_row_security(); END $$;
SET LOCAL ROLE tap_tenant_a;
CREATE TEMP TABLE tenant_scopes (role name, scope text);
INSERT INTO pg_temp.tenant_scopes VALUES ('tap_tenant_a', 'tap_tenant_a'), ('tap_tenant_a', 'tap_tenant_b');
SELECT is((SELECT outcome FROM idem_claim('a-1', '{"amount": 9}', 'tap_tenant_a')), 'replay',
          'policy helper: A replays its own key through the helper''s own table');
SELECT is((SELECT key FROM idem_lookup('a-1', 'tap_tenant_a')), 'a-1',
          'policy helper: A looks its own key up');
SELECT is((SELECT count(*) FROM idem_lookup('b-done', 'tap_tenant_b')), 0::bigint,
          'policy helper: A''s temporary look-alike of the helper''s table shows A none of B''s keys');
SELECT throws_ok($$SELECT idem_claim('b-helper', NULL, 'tap_tenant_b')$$, '42501', NULL,
                 'policy helper: nor lets A claim in B''s scope');
SELECT is((SELECT outcome FROM idem_execute('a-helper', NULL, 'tap_tenant_a', 201, 'SELECT 1 AS one')), 'new',
          'policy helper: A runs idem_execute in its own scope');
RESET ROLE;
SELECT is((SELECT string_agg(DISTINCT path, ' | ') FROM tap_tenant_app.seen_paths), 'pg_catalog,pg_temp',
          'policy helper: every row the key functions read or wrote for A, they did under search_path pg_catalog, pg_temp');

/* ==== availability: no tenant can lock the others out ==== */

CREATE SCHEMA tap_tenant_a_views AUTHORIZATION tap_tenant_a;
SET LOCAL ROLE tap_tenant_a;
SELECT throws_ok($$LOCK TABLE idempotency_keys IN EXCLUSIVE MODE NOWAIT$$, '42501',
                 'permission denied to lock idempotency_keys in EXCLUSIVE mode',
                 'a tenant cannot lock the whole table (EXCLUSIVE)');
SELECT throws_ok($$LOCK TABLE idempotency_keys$$, '42501',
                 'permission denied to lock idempotency_keys in ACCESS EXCLUSIVE mode',
                 'a tenant cannot lock the whole table (ACCESS EXCLUSIVE, the default)');
SELECT throws_ok($$LOCK TABLE idempotency_keys IN SHARE MODE$$, '42501', NULL,
                 'a tenant cannot lock the whole table (SHARE, which blocks every claim)');
CREATE VIEW tap_tenant_a_views.mine AS SELECT * FROM idempotency_keys;
CREATE VIEW tap_tenant_a_views.mine2 AS SELECT key FROM tap_tenant_a_views.mine;
SELECT throws_ok($$LOCK TABLE tap_tenant_a_views.mine2 IN EXCLUSIVE MODE$$, '42501', NULL,
                 'nor through a view of a view (LOCK recurses into views)');
SELECT lives_ok($$LOCK TABLE idempotency_keys IN ROW EXCLUSIVE MODE$$,
                'ROW EXCLUSIVE, which claims take anyway, is allowed');
RESET ROLE;
SET LOCAL ROLE tap_tenant_ops;
SELECT lives_ok($$LOCK TABLE idempotency_keys IN EXCLUSIVE MODE$$,
                'a member of idempotency_admin may lock the table');
RESET ROLE;
SELECT lives_ok($$LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE$$,
                'the owner (superuser) may lock the table');

SELECT * FROM finish();
ROLLBACK;
