-- test/edition/keys-every-state.sql: the database migrate.sh and
-- migrate-tle.sh move between the editions: keys in every state (live
-- with a recovery point, stale, completed, failed retryable, failed
-- final, a tenant's own row of token 0, a response nested 16 deep), the
-- application's table, a tenant policy (role mv_tenant).
-- Run after CREATE EXTENSION, as a role that may create policies on
-- idempotency_keys.
CREATE TABLE payments (id bigserial PRIMARY KEY, key text, amount numeric);
SELECT outcome FROM idem_claim('live', '{"amount": 1.50, "to": "A"}', 'm1', lease => '1 hour');
SELECT idem_checkpoint('live', 'authorized', 'm1', (SELECT token FROM idem_lookup('live', 'm1')));
SELECT outcome FROM idem_claim('stale', '{"amount": 2}', 'm1', lease => '1 second');
BEGIN;
SELECT outcome FROM idem_claim('done', '{"amount": 3, "note": "é\u00e9 \"q\""}', 'm1');
INSERT INTO payments (key, amount) VALUES ('done', 3);
SELECT idem_complete('done', 201, '{"payment_id": 1, "amount": 3.10, "big": 1e40, "s": "ü\n"}', 'm1');
COMMIT;
SELECT outcome FROM idem_claim('retry', '{"amount": 4}', 'm2');
SELECT idem_fail('retry', 'm2', (SELECT token FROM idem_lookup('retry', 'm2')), 503, '{"error": "upstream"}', true);
SELECT outcome FROM idem_claim('final', NULL, 'm2');
SELECT idem_fail('final', 'm2', (SELECT token FROM idem_lookup('final', 'm2')), 402, '{"error": "card_declined"}', false);
-- a row a tenant may write with its table privileges, token 0 and a key
-- like the edition's key-lock probes' (a restore's COPY writes it back)
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('m2', E'\x01lock 12345', 'completed', 0, now(), now(), now() + interval '1 day');
-- a response at the edge of what both editions' CHECK takes: over 8 kB,
-- an item at level 16, numbers that print 13,000 times their size
BEGIN;
SELECT outcome FROM idem_claim('deep', NULL, 'm2');
SELECT idem_complete('deep', 200, (repeat('[', 15) || '[' || repeat('"xxxxxxxxxx",', 900) || repeat('1e131000,', 40) || '0]'
                                   || repeat(']', 15))::jsonb, 'm2');
COMMIT;
SELECT pg_sleep(1.2);
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY mv_scope ON idempotency_keys TO mv_tenant USING (scope = 'm1') WITH CHECK (scope = 'm1');
