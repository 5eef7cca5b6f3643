/*
 * test/pgtap/privileges.sql: who may do what.
 *
 * PUBLIC gets nothing but idem_request_hash(*); idempotency_app may claim
 * and record keys; idempotency_admin (a member of idempotency_app) may also
 * settle keys (idem_resolve) and run expiry (idem_expire).  The functions
 * run as the caller, so the grants on the table and the sequence are what
 * a caller's role actually exercises: the second half of this file runs
 * calls as throw-away roles (SET LOCAL ROLE) and checks the SQLSTATE 42501
 * (insufficient_privilege) a role without the grant gets.
 *
 * Run with pg_prove against a database where a superuser has done
 * CREATE EXTENSION pgtap; CREATE EXTENSION idempotency;
 * The roles it creates vanish with the final ROLLBACK.
 */
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;

SELECT plan(100);

/* ---- PUBLIC ---- */

SELECT table_privs_are('idempotency_keys', 'public', ARRAY[]::name[],
                       'PUBLIC has no privilege on idempotency_keys');
SELECT sequence_privs_are('idempotency_token_seq', 'public', ARRAY[]::name[],
                          'PUBLIC has no privilege on idempotency_token_seq');

SELECT function_privs_are('idem_claim', ARRAY['text', 'jsonb', 'text', 'interval', 'interval', 'boolean', 'interval', 'integer'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_claim');
SELECT function_privs_are('idem_complete', ARRAY['text', 'integer', 'jsonb', 'text', 'bigint'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_complete');
SELECT function_privs_are('idem_claim_batch', ARRAY['text[]', 'jsonb[]', 'text', 'interval', 'interval', 'boolean', 'integer'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_claim_batch');
SELECT function_privs_are('idem_record_batch', ARRAY['text[]', 'integer[]', 'jsonb[]', 'text', 'bigint[]', 'boolean[]', 'boolean[]'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_record_batch');
SELECT function_privs_are('idem_claim_batch', ARRAY['text[]', 'jsonb[]', 'text', 'interval', 'interval', 'boolean', 'integer'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_claim_batch');
SELECT function_privs_are('idem_record_batch', ARRAY['text[]', 'integer[]', 'jsonb[]', 'text', 'bigint[]', 'boolean[]', 'boolean[]'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_record_batch');
SELECT function_privs_are('idem_fail', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'boolean'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_fail');
SELECT function_privs_are('idem_heartbeat', ARRAY['text', 'text', 'bigint', 'interval'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_heartbeat');
SELECT function_privs_are('idem_release', ARRAY['text', 'text', 'bigint'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_release');
SELECT function_privs_are('idem_checkpoint', ARRAY['text', 'text', 'text', 'bigint'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_checkpoint');
SELECT function_privs_are('idem_resolve', ARRAY['text', 'text', 'text', 'integer', 'jsonb'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_resolve');
SELECT function_privs_are('idem_lookup', ARRAY['text', 'text'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_lookup');
SELECT function_privs_are('idem_expire', ARRAY['integer'],
                          'public', ARRAY[]::name[], 'PUBLIC cannot execute idem_expire');
SELECT function_privs_are('idem_request_hash', ARRAY['jsonb'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may execute idem_request_hash(jsonb) (pure function)');
SELECT function_privs_are('idem_request_hash', ARRAY['bytea'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may execute idem_request_hash(bytea)');
SELECT function_privs_are('idem_request_hash', ARRAY['text'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may execute idem_request_hash(text)');

/* The same over every function the extension owns, including any added later. */
SELECT is(
    (SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text)
     FROM pg_proc p
     JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                     AND d.deptype = 'e'
     JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
     WHERE p.proname <> 'idem_request_hash'
       AND has_function_privilege('public', p.oid, 'EXECUTE')),
    NULL,
    'PUBLIC can execute no extension function except idem_request_hash');

/* ---- idempotency_app ---- */

SELECT table_privs_are('idempotency_keys', 'idempotency_app',
                       ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
                       'idempotency_app has exactly SELECT, INSERT, UPDATE, DELETE on idempotency_keys');
SELECT sequence_privs_are('idempotency_token_seq', 'idempotency_app', ARRAY['USAGE'],
                          'idempotency_app has exactly USAGE on idempotency_token_seq');

SELECT function_privs_are('idem_claim', ARRAY['text', 'jsonb', 'text', 'interval', 'interval', 'boolean', 'interval', 'integer'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_claim');
SELECT function_privs_are('idem_complete', ARRAY['text', 'integer', 'jsonb', 'text', 'bigint'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_complete');
SELECT function_privs_are('idem_fail', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'boolean'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_fail');
SELECT function_privs_are('idem_heartbeat', ARRAY['text', 'text', 'bigint', 'interval'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_heartbeat');
SELECT function_privs_are('idem_release', ARRAY['text', 'text', 'bigint'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_release');
SELECT function_privs_are('idem_checkpoint', ARRAY['text', 'text', 'text', 'bigint'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_checkpoint');
SELECT function_privs_are('idem_lookup', ARRAY['text', 'text'],
                          'idempotency_app', ARRAY['EXECUTE'], 'idempotency_app may execute idem_lookup');
SELECT function_privs_are('idem_resolve', ARRAY['text', 'text', 'text', 'integer', 'jsonb'],
                          'idempotency_app', ARRAY[]::name[], 'idempotency_app may NOT execute idem_resolve');
SELECT function_privs_are('idem_expire', ARRAY['integer'],
                          'idempotency_app', ARRAY[]::name[], 'idempotency_app may NOT execute idem_expire');

/* ---- idempotency_admin ---- */

SELECT is_member_of('idempotency_app', ARRAY['idempotency_admin'],
                    'idempotency_admin is a member of idempotency_app');
SELECT ok(pg_has_role('idempotency_admin', 'idempotency_app', 'USAGE'),
          'idempotency_admin inherits the privileges of idempotency_app');
SELECT ok(NOT pg_has_role('idempotency_app', 'idempotency_admin', 'MEMBER'),
          'idempotency_app is not a member of idempotency_admin');
SELECT function_privs_are('idem_resolve', ARRAY['text', 'text', 'text', 'integer', 'jsonb'],
                          'idempotency_admin', ARRAY['EXECUTE'], 'idempotency_admin may execute idem_resolve');
SELECT function_privs_are('idem_expire', ARRAY['integer'],
                          'idempotency_admin', ARRAY['EXECUTE'], 'idempotency_admin may execute idem_expire');
SELECT function_privs_are('idem_claim', ARRAY['text', 'jsonb', 'text', 'interval', 'interval', 'boolean', 'interval', 'integer'],
                          'idempotency_admin', ARRAY['EXECUTE'], 'idempotency_admin may execute idem_claim (through idempotency_app)');
SELECT table_privs_are('idempotency_keys', 'idempotency_admin',
                       ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
                       'idempotency_admin has the table privileges of idempotency_app, no more');

/* ---- statistics: operators read and reset them ---- */

SELECT table_privs_are('idempotency_stats', 'public', ARRAY[]::name[],
                       'PUBLIC cannot read idempotency_stats');
SELECT ok(has_table_privilege('idempotency_admin', 'idempotency_stats', 'SELECT'),
          'idempotency_admin may read idempotency_stats');
SELECT function_privs_are('idem_stats_reset', ARRAY[]::name[],
                          'idempotency_admin', ARRAY['EXECUTE'], 'idempotency_admin may execute idem_stats_reset');
SELECT function_privs_are('idem_stats_reset', ARRAY[]::name[],
                          'idempotency_app', ARRAY[]::name[], 'idempotency_app may NOT reset the statistics');
SELECT function_privs_are('idem_stats_reset', ARRAY[]::name[],
                          'public', ARRAY[]::name[], 'PUBLIC may NOT reset the statistics');
SELECT function_privs_are('idem_stats_databases', ARRAY[]::name[],
                          'idempotency_admin', ARRAY['EXECUTE'], 'idempotency_admin may read every database''s counters');
SELECT function_privs_are('idem_stats_databases', ARRAY[]::name[],
                          'idempotency_app', ARRAY[]::name[], 'idempotency_app may NOT read every database''s counters');
SELECT function_privs_are('idem_stats_databases', ARRAY[]::name[],
                          'public', ARRAY[]::name[], 'PUBLIC may NOT read every database''s counters');

/* ---- Citus helpers ---- */

SELECT function_privs_are('idem_distribute', ARRAY['regclass', 'boolean'],
                          'idempotency_admin', ARRAY[]::name[], 'idem_distribute is the owner''s alone (not idempotency_admin)');
SELECT function_privs_are('idem_distribute', ARRAY['regclass', 'boolean'],
                          'public', ARRAY[]::name[], 'PUBLIC may NOT call idem_distribute');
SELECT function_privs_are('idem_table_bytes', ARRAY[]::name[],
                          'idempotency_admin', ARRAY['EXECUTE'], 'idempotency_admin may call idem_table_bytes (for idempotency_stats)');
SELECT function_privs_are('idem_table_bytes', ARRAY[]::name[],
                          'idempotency_app', ARRAY[]::name[], 'idempotency_app may NOT call idem_table_bytes');

/* ---- row level security kept for pg_dump: the owner's alone ---- */

SELECT function_privs_are('idem_save_row_security', ARRAY[]::name[],
                          'idempotency_admin', ARRAY[]::name[], 'idempotency_admin may NOT record policies');
SELECT function_privs_are('idem_restore_row_security', ARRAY[]::name[],
                          'idempotency_admin', ARRAY[]::name[], 'idempotency_admin may NOT put policies on the table');
SELECT table_privs_are('idempotency_row_security', 'idempotency_app', ARRAY['SELECT'],
                       'idempotency_app may only read the recorded policies (the key functions check them)');
SELECT table_privs_are('idempotency_row_security', 'public', ARRAY[]::name[],
                       'PUBLIC has no privilege on the recorded policies');

/* ---- calls as real roles ---- */

CREATE ROLE idem_tap_nobody NOLOGIN;
CREATE ROLE idem_tap_app NOLOGIN IN ROLE idempotency_app;
CREATE ROLE idem_tap_admin NOLOGIN IN ROLE idempotency_admin;

/* A role with no grants: every key function is refused with 42501. */
SET LOCAL ROLE idem_tap_nobody;
SELECT is(current_user::text, 'idem_tap_nobody', 'now running as a role with no grants');

SELECT throws_ok($$SELECT * FROM idem_claim('tap-priv-nobody')$$,
                 '42501', NULL, 'role without grants: idem_claim fails with 42501');
SELECT throws_ok($$SELECT * FROM idem_claim('tap-priv-nobody', request => '{"a":1}', scope => 's')$$,
                 '42501', NULL, 'role without grants: idem_claim with named arguments fails with 42501');
SELECT throws_ok($$SELECT idem_complete('tap-priv-nobody', 200, '{}')$$,
                 '42501', NULL, 'role without grants: idem_complete fails with 42501');
SELECT throws_ok($$SELECT idem_fail('tap-priv-nobody')$$,
                 '42501', NULL, 'role without grants: idem_fail fails with 42501');
SELECT throws_ok($$SELECT idem_heartbeat('tap-priv-nobody')$$,
                 '42501', NULL, 'role without grants: idem_heartbeat fails with 42501');
SELECT throws_ok($$SELECT idem_release('tap-priv-nobody')$$,
                 '42501', NULL, 'role without grants: idem_release fails with 42501');
SELECT throws_ok($$SELECT idem_checkpoint('tap-priv-nobody', 'step-1')$$,
                 '42501', NULL, 'role without grants: idem_checkpoint fails with 42501');
SELECT throws_ok($$SELECT * FROM idem_lookup('tap-priv-nobody')$$,
                 '42501', NULL, 'role without grants: idem_lookup fails with 42501');
SELECT throws_ok($$SELECT idem_resolve('tap-priv-nobody', '', 'release')$$,
                 '42501', NULL, 'role without grants: idem_resolve fails with 42501');
SELECT throws_ok($$SELECT idem_expire()$$,
                 '42501', NULL, 'role without grants: idem_expire fails with 42501');
SELECT throws_ok($$SELECT * FROM idempotency_keys$$,
                 '42501', NULL, 'role without grants: cannot read idempotency_keys directly');
SELECT throws_ok($$SELECT nextval('idempotency_token_seq')$$,
                 '42501', NULL, 'role without grants: cannot draw tokens');
SELECT lives_ok($$SELECT idem_request_hash('{"a":1}'::jsonb)$$,
                'role without grants: idem_request_hash(jsonb) works');
SELECT lives_ok($$SELECT idem_request_hash('abc'::text), idem_request_hash('\x00'::bytea)$$,
                'role without grants: idem_request_hash(text) and (bytea) work');

RESET ROLE;
SELECT is((SELECT count(*) FROM idempotency_keys WHERE key = 'tap-priv-nobody'), 0::bigint,
          'the refused calls left no row behind');

/* A role granted idempotency_app: claims and completes, cannot settle or expire. */
SET LOCAL ROLE idem_tap_app;
SELECT is(current_user::text, 'idem_tap_app', 'now running as a role granted idempotency_app');

SELECT is((SELECT outcome FROM idem_claim('tap-priv-app', request => '{"order":"A1"}', scope => 'tap-priv')),
          'new', 'idempotency_app member: idem_claim returns new');
SELECT lives_ok($$SELECT idem_checkpoint('tap-priv-app', 'charged', scope => 'tap-priv')$$,
                'idempotency_app member: idem_checkpoint works in the claiming transaction');
SELECT isa_ok(idem_heartbeat('tap-priv-app', scope => 'tap-priv'), 'timestamp with time zone',
              'idempotency_app member: idem_heartbeat returns the lease end');
SELECT lives_ok($$SELECT idem_complete('tap-priv-app', 201, '{"payment_id": 1}', scope => 'tap-priv')$$,
                'idempotency_app member: idem_complete works');
SELECT is((SELECT status::text FROM idem_lookup('tap-priv-app', 'tap-priv')), 'completed',
          'idempotency_app member: idem_lookup sees the completed key');
SELECT is((SELECT outcome FROM idem_claim('tap-priv-app', request => '{"order":"A1"}', scope => 'tap-priv')),
          'replay', 'idempotency_app member: a duplicate claim replays');
SELECT is((SELECT response FROM idem_claim('tap-priv-app', request => '{"order":"A1"}', scope => 'tap-priv')),
          '{"payment_id": 1}'::jsonb, 'idempotency_app member: the replay carries the stored response');

SELECT is((SELECT outcome FROM idem_claim('tap-priv-app-2', scope => 'tap-priv')),
          'new', 'idempotency_app member: claims a second key');
SELECT lives_ok($$SELECT idem_release('tap-priv-app-2', scope => 'tap-priv')$$,
                'idempotency_app member: idem_release of its own claim works');
SELECT is((SELECT outcome FROM idem_claim('tap-priv-app-3', scope => 'tap-priv')),
          'new', 'idempotency_app member: claims a third key');
SELECT lives_ok($$SELECT idem_fail('tap-priv-app-3', scope => 'tap-priv', response_code => 402,
                                   response => '{"error":"card_declined"}', retryable => false)$$,
                'idempotency_app member: idem_fail works');

SELECT throws_ok($$SELECT idem_resolve('tap-priv-app', 'tap-priv', 'release')$$,
                 '42501', NULL, 'idempotency_app member: idem_resolve fails with 42501');
SELECT throws_ok($$SELECT idem_resolve('tap-priv-app', 'tap-priv', 'fail', 500, '{}')$$,
                 '42501', NULL, 'idempotency_app member: idem_resolve fail fails with 42501');
SELECT throws_ok($$SELECT idem_expire()$$,
                 '42501', NULL, 'idempotency_app member: idem_expire fails with 42501');
SELECT throws_ok($$SELECT idem_expire(10)$$,
                 '42501', NULL, 'idempotency_app member: idem_expire(max_rows) fails with 42501');
SELECT throws_ok($$TRUNCATE idempotency_keys$$,
                 '42501', NULL, 'idempotency_app member: cannot TRUNCATE the keys');
SELECT throws_ok($$SELECT setval('idempotency_token_seq', 1)$$,
                 '42501', NULL, 'idempotency_app member: cannot rewind the token sequence');

RESET ROLE;
SELECT is((SELECT status::text FROM idem_lookup('tap-priv-app', 'tap-priv')), 'completed',
          'the refused idem_resolve left the completed key as it was');

/* A role granted idempotency_admin: everything the app role can, plus settle and expire. */
SET LOCAL ROLE idem_tap_admin;
SELECT is(current_user::text, 'idem_tap_admin', 'now running as a role granted idempotency_admin');

SELECT is((SELECT outcome FROM idem_claim('tap-priv-admin', scope => 'tap-priv')),
          'new', 'idempotency_admin member: idem_claim works (through idempotency_app)');
SELECT lives_ok($$SELECT idem_resolve('tap-priv-admin', 'tap-priv', 'release')$$,
                'idempotency_admin member: idem_resolve release works');
SELECT is((SELECT count(*) FROM idem_lookup('tap-priv-admin', 'tap-priv')), 0::bigint,
          'idempotency_admin member: the released key is gone');
SELECT is((SELECT outcome FROM idem_claim('tap-priv-admin-2', scope => 'tap-priv')),
          'new', 'idempotency_admin member: claims a second key');
SELECT lives_ok($$SELECT idem_resolve('tap-priv-admin-2', 'tap-priv', 'fail', 500, '{"error":"settled"}')$$,
                'idempotency_admin member: idem_resolve fail works');
SELECT is((SELECT status::text FROM idem_lookup('tap-priv-admin-2', 'tap-priv')), 'failed',
          'idempotency_admin member: the settled key is failed');
SELECT lives_ok($$SELECT idem_expire()$$, 'idempotency_admin member: idem_expire works');
SELECT lives_ok($$SELECT idem_expire(5)$$, 'idempotency_admin member: idem_expire(max_rows) works');
SELECT lives_ok($$SELECT * FROM idempotency_stats$$, 'idempotency_admin member: reads idempotency_stats');
SELECT throws_ok($$TRUNCATE idempotency_keys$$,
                 '42501', NULL, 'idempotency_admin member: cannot TRUNCATE the keys either');

RESET ROLE;
SELECT is(current_user::text, session_user::text, 'back to the session user');

SELECT * FROM finish();
ROLLBACK;
