-- test/edition/keys-every-state-claims.sql: the same claims of the keys of
-- keys-every-state.sql, made against each edition after a move (migrate.sh,
-- migrate-tle.sh): each answer must be what the source would have given.
SELECT 'live', outcome, status FROM idem_claim('live', '{"to": "A", "amount": 1.5}', 'm1', wait => false);
SELECT 'done', outcome, response_code, response::text FROM idem_claim('done', '{"note": "éé \"q\"", "amount": 3.0}', 'm1');
SELECT 'final', outcome, response_code, response::text FROM idem_claim('final', NULL, 'm2');
SELECT 'stale', outcome, recovery_point, token > (SELECT max(token) FROM idempotency_keys WHERE key <> 'stale')
  FROM idem_claim('stale', '{"amount": 2}', 'm1');
SELECT 'retry', outcome, token > (SELECT max(token) FROM idempotency_keys WHERE key <> 'retry')
  FROM idem_claim('retry', '{"amount": 4}', 'm2');
SELECT 'fresh', outcome FROM idem_claim('fresh', '{}', 'm1');
