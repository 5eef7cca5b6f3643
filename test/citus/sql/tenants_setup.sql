-- test/citus/sql/tenants_setup.sql: the recipe of docs/tenants.md, as a
-- superuser on the coordinator (Citus propagates it to the shards and roles
-- to the workers).
\set ON_ERROR_STOP 1
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON idempotency_keys TO idempotency_app
    USING (scope = current_user) WITH CHECK (scope = current_user);
CREATE POLICY admin_all ON idempotency_keys TO idempotency_admin
    USING (true) WITH CHECK (true);
SELECT idem_save_row_security();
CREATE ROLE tenant_a LOGIN IN ROLE idempotency_app;
CREATE ROLE tenant_b LOGIN IN ROLE idempotency_app;
GRANT SELECT, INSERT ON payments TO idempotency_app;
GRANT USAGE ON SEQUENCE payments_id_seq TO idempotency_app;
