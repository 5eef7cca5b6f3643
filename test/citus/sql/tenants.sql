-- test/citus/sql/tenants.sql: what docs/tenants.md promises, as tenant_a
-- (whose scope is its role name) against tenant_b's key :'p'-b, claimed by
-- tenant_b with token :tb.  Keys are prefixed with :'p' (one prefix per
-- run: through the coordinator, delegated, in a transaction, on a worker).
-- Compared with expected/tenants.out (a single server's answers).
\set SHOW_CONTEXT never
SELECT current_user;
-- its own scope works
SELECT outcome FROM idem_claim(:'p' || '-a', '{"n": 1}', 'tenant_a');
SELECT token AS ta FROM idem_lookup(:'p' || '-a', 'tenant_a') \gset
SELECT idem_complete(:'p' || '-a', 201, '{"ok": true}', 'tenant_a', token => :ta);
SELECT outcome, response FROM idem_claim(:'p' || '-a', '{"n": 1}', 'tenant_a');
SELECT outcome, response - 'id' AS response FROM idem_execute(:'p' || '-e', NULL, 'tenant_a', 201,
    'INSERT INTO payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id, amount', 'tenant_a', :'p' || '-e', 1);
-- another tenant's key: invisible, cannot be probed, squatted or changed
SELECT count(*) AS visible FROM idem_lookup(:'p' || '-b', 'tenant_b');
SELECT count(*) AS visible FROM idempotency_keys WHERE scope = 'tenant_b';
SELECT outcome FROM idem_claim(:'p' || '-b', NULL, 'tenant_b');
SELECT outcome FROM idem_claim(:'p' || '-new', NULL, 'tenant_b');
SELECT outcome FROM idem_execute(:'p' || '-new', NULL, 'tenant_b', 201, 'SELECT 1 AS one');
SELECT idem_complete(:'p' || '-b', 200, '{}', 'tenant_b', token => :tb);
SELECT idem_fail(:'p' || '-b', 'tenant_b', :tb);
SELECT idem_heartbeat(:'p' || '-b', 'tenant_b', :tb);
SELECT idem_checkpoint(:'p' || '-b', 'x', 'tenant_b', :tb);
SELECT idem_release(:'p' || '-b', 'tenant_b', :tb);
UPDATE idempotency_keys SET response_code = 1 WHERE scope = 'tenant_b';
DELETE FROM idempotency_keys WHERE scope = 'tenant_b';
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('tenant_b', :'p' || '-ins', 'completed', 1, now(), now(), now() + interval '1 day');
SELECT idem_resolve(:'p' || '-b', 'tenant_b', 'release');
