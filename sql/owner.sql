-- The configuration most users have: a database that is not postgres, owned
-- by a role that is not a superuser; a superuser installs the extension (it
-- is not trusted) and grants its roles, as README's Configure says; the owner
-- makes the service's schema; the service and an operator use the key
-- functions with every idempotency.* setting at its default.  Run with and
-- without shared_preload_libraries (REGRESS in both).
CREATE ROLE owner_shop LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;
CREATE ROLE owner_service LOGIN;
CREATE ROLE owner_operator LOGIN;
CREATE DATABASE owner_shop_db OWNER owner_shop;
\c owner_shop_db
-- the superuser's part
CREATE EXTENSION idempotency;
GRANT idempotency_app TO owner_service;
GRANT idempotency_admin TO owner_operator;
SELECT name, setting FROM pg_settings WHERE name LIKE 'idempotency.%' AND source <> 'default';
-- the owner's part: the service's own schema
SET ROLE owner_shop;
CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text, amount int);
GRANT SELECT, INSERT ON payments TO owner_service;
GRANT USAGE ON SEQUENCE payments_id_seq TO owner_service;
-- the owner holds no key privilege of its own
SELECT has_table_privilege('idempotency_keys', 'SELECT') AS owner_reads_keys,
       has_function_privilege('idem_claim(text,jsonb,text,interval,interval,boolean,interval,integer)', 'EXECUTE') AS owner_claims;
RESET ROLE;
-- the service: one transaction, then the cross-transaction pattern
SET ROLE owner_service;
BEGIN;
SELECT outcome, token IS NOT NULL AS has_token
  FROM idem_claim('pay-1', '{"order": "A1", "amount": 3000}', scope => 'merchant-1');
INSERT INTO payments (order_id, amount) VALUES ('A1', 3000);
SELECT idem_complete('pay-1', 201, '{"payment_id": 1}', scope => 'merchant-1');
COMMIT;
SELECT outcome, response_code, response
  FROM idem_claim('pay-1', '{"amount": 3000, "order": "A1"}', scope => 'merchant-1');
SELECT token AS t FROM idem_claim('card-1', '{"card": "x"}', scope => 'merchant-1') \gset
SELECT idem_heartbeat('card-1', 'merchant-1', :t) > now() AS lease_extended;
SELECT idem_checkpoint('card-1', 'authorized', 'merchant-1', :t);
SELECT idem_complete('card-1', 200, '{"ok": true}', 'merchant-1', :t);
SELECT key, status, response_code, locked_until IS NULL AS no_lease,
       expires_at - updated_at = interval '24 hours' AS default_retention
  FROM idem_lookup('card-1', 'merchant-1');
-- what the service may not do
SELECT idem_expire();
SELECT idem_resolve('card-1', 'merchant-1', 'fail');
RESET ROLE;
-- the operator
SET ROLE owner_operator;
SELECT idem_expire() >= 0 AS expired;
SELECT count(*) AS keys FROM idempotency_keys;
RESET ROLE;
SELECT count(*) AS payments FROM payments;
\c contrib_regression
DROP DATABASE owner_shop_db;
DROP ROLE owner_shop, owner_service, owner_operator;
