/*
 * Tenants: with the row level security recipe from README.md, a role bound
 * to one scope cannot read, probe, squat or change another scope's keys,
 * neither through the functions (SECURITY INVOKER, so the policies apply to
 * their SQL) nor through the table.  A plan the functions prepared while a
 * superuser ran them must not carry over to a tenant (plan cache + RLS).
 */
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SELECT plan(21);

-- the recipe
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
    USING (scope = current_user) WITH CHECK (scope = current_user);
CREATE POLICY admin_all ON idempotency_keys TO idempotency_admin
    USING (true) WITH CHECK (true);
CREATE ROLE tenant_a IN ROLE idempotency_app;
CREATE ROLE tenant_b IN ROLE idempotency_app;
CREATE ROLE tenant_ops IN ROLE idempotency_admin;

-- B's keys, made by B; the superuser's calls first, so their plans are cached
SET LOCAL ROLE tenant_b;
SELECT idem_claim('b-done', '{"amount": 1}', 'tenant_b');
SELECT idem_complete('b-done', 201, '{"secret": "b"}', 'tenant_b');
SELECT idem_claim('b-open', NULL, 'tenant_b', lease => '1 hour');
RESET ROLE;
SELECT idem_lookup('b-done', 'tenant_b');
SELECT idem_claim('su-key', NULL, 'tenant_b');
SELECT token AS b_token FROM idempotency_keys WHERE key = 'b-open' \gset

SET LOCAL ROLE tenant_a;
-- A's own keys work end to end
SELECT is((SELECT outcome FROM idem_claim('a-1', '{"amount": 2}', 'tenant_a')), 'new', 'A claims in its scope');
SELECT lives_ok($$SELECT idem_complete('a-1', 201, '{"mine": true}', 'tenant_a')$$, 'A completes its key');
SELECT is((SELECT outcome || ' ' || response FROM idem_claim('a-1', '{"amount": 2}', 'tenant_a')),
          'replay {"mine": true}', 'A replays its key');
-- read: nothing of B's, through the functions or the table
SELECT is((SELECT count(*) FROM idem_lookup('b-done', 'tenant_b')), 0::bigint, 'A cannot look up B''s key');
SELECT is((SELECT count(*) FROM idempotency_keys WHERE scope <> 'tenant_a'), 0::bigint, 'A sees only its rows in the table');
-- probe and squat: an existing and a missing key of B's answer the same
SELECT throws_ok($$SELECT idem_claim('b-done', '{"amount": 1}', 'tenant_b')$$, '42501',
                 'new row violates row-level security policy for table "idempotency_keys"',
                 'claiming B''s existing key is refused like any write into B''s scope');
SELECT throws_ok($$SELECT idem_claim('b-nothing', '{"amount": 1}', 'tenant_b')$$, '42501',
                 'new row violates row-level security policy for table "idempotency_keys"',
                 'claiming a missing key in B''s scope is refused the same way: no probing, no squatting');
SELECT throws_ok($$SELECT idem_execute('b-nothing', NULL, 'tenant_b', 201, 'SELECT 1')$$, '42501',
                 NULL, 'idem_execute in B''s scope is refused');
-- change: every holder call finds no such key, with the right token or not
SELECT throws_ok(format($$SELECT idem_complete('b-open', 200, '{}', 'tenant_b', %s)$$, :b_token), 'IK004',
                 NULL, 'A cannot complete B''s claim even with its token');
SELECT throws_ok(format($$SELECT idem_fail('b-open', 'tenant_b', %s)$$, :b_token), 'IK004',
                 NULL, 'A cannot fail B''s claim');
SELECT throws_ok(format($$SELECT idem_heartbeat('b-open', 'tenant_b', %s)$$, :b_token), 'IK004',
                 NULL, 'A cannot extend B''s lease');
SELECT throws_ok(format($$SELECT idem_release('b-open', 'tenant_b', %s)$$, :b_token), 'IK004',
                 NULL, 'A cannot release B''s claim');
SELECT throws_ok(format($$SELECT idem_checkpoint('b-open', 'x', 'tenant_b', %s)$$, :b_token), 'IK004',
                 NULL, 'A cannot checkpoint B''s claim');
SELECT throws_ok($$SELECT idem_complete('b-nothing', 200, '{}', 'tenant_b', 1)$$, 'IK004',
                 NULL, 'a missing key of B''s answers the same IK004');
-- and not through the table
SELECT lives_ok($$UPDATE idempotency_keys SET response = '{"evil": 1}' WHERE scope = 'tenant_b'$$,
                'A''s UPDATE of B''s rows matches none (checked below)');
SELECT lives_ok($$DELETE FROM idempotency_keys WHERE scope = 'tenant_b'$$,
                'A''s DELETE of B''s rows matches none (checked below)');
SELECT throws_ok($$INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
                   VALUES ('tenant_b', 'squat', 'completed', 1, now(), now(), now() + '1 day')$$, '42501',
                 NULL, 'A cannot insert into B''s scope directly');
RESET ROLE;

-- B's rows are exactly as B left them
SELECT is((SELECT string_agg(key || ':' || status || ':' || coalesce(response::text, ''), ',' ORDER BY key)
           FROM idempotency_keys WHERE scope = 'tenant_b'),
          'b-done:completed:{"secret": "b"},b-open:processing:,su-key:processing:',
          'B''s keys are unchanged');

-- B still sees and replays its own
SET LOCAL ROLE tenant_b;
SELECT is((SELECT outcome || ' ' || response FROM idem_claim('b-done', '{"amount": 1}', 'tenant_b')),
          'replay {"secret": "b"}', 'B replays its key');
RESET ROLE;

-- the operator role sees every scope, so expiry works
SET LOCAL ROLE tenant_ops;
SELECT is((SELECT count(DISTINCT scope) FROM idempotency_keys WHERE scope LIKE 'tenant_%'), 2::bigint,
          'idempotency_admin members see every scope');
SELECT lives_ok($$SELECT idem_resolve('b-open', 'tenant_b', 'release')$$, 'an operator can settle a tenant''s key');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
