-- Every setting: its default, its effect, and its bounds.
\set SHOW_CONTEXT never

SELECT name, setting, unit, context, vartype, enumvals
FROM pg_settings WHERE name LIKE 'idempotency.%' ORDER BY name;

-- idempotency.lease is the default lease of a claim
SET idempotency.lease = '5min';
SELECT outcome FROM idem_claim('g-lease', NULL, 'guc');
SELECT locked_until - created_at AS lease FROM idempotency_keys WHERE scope = 'guc' AND key = 'g-lease';
-- ... and of a heartbeat
SELECT idem_heartbeat('g-lease', 'guc', (SELECT token FROM idempotency_keys WHERE scope = 'guc' AND key = 'g-lease'))
       - now() BETWEEN '4 min' AND '6 min' AS heartbeat_uses_lease;
-- the per-call argument wins
SELECT outcome FROM idem_claim('g-lease-arg', NULL, 'guc', lease => '7 s');
SELECT locked_until - created_at AS lease FROM idempotency_keys WHERE scope = 'guc' AND key = 'g-lease-arg';
RESET idempotency.lease;

-- idempotency.retention: how long a finished key is kept
SET idempotency.retention = '2h';
BEGIN;
SELECT outcome FROM idem_claim('g-ret', NULL, 'guc');
SELECT idem_complete('g-ret', 200, '{}', 'guc');
SELECT expires_at - updated_at AS retention FROM idempotency_keys WHERE scope = 'guc' AND key = 'g-ret';
COMMIT;
-- the claim's retention argument carries over to complete
BEGIN;
SELECT outcome FROM idem_claim('g-ret-arg', NULL, 'guc', retention => '3 days');
SELECT idem_fail('g-ret-arg', 'guc', retryable => false);
SELECT expires_at - updated_at AS retention FROM idempotency_keys WHERE scope = 'guc' AND key = 'g-ret-arg';
COMMIT;
RESET idempotency.retention;

-- idempotency.max_key_length bounds keys and scopes, in bytes
SET idempotency.max_key_length = 8;
SELECT outcome FROM idem_claim('12345678', NULL, 'guc');
SELECT outcome FROM idem_claim('123456789', NULL, 'guc');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_claim('k', NULL, 'scope-too-long');
\echo :LAST_ERROR_SQLSTATE
RESET idempotency.max_key_length;

-- bounds and bad values
SET idempotency.lease = 0;
SET idempotency.retention = -1;
SET idempotency.max_key_length = 2000;
SET idempotency.stale_policy = 'maybe';
SET idempotency.no_such_setting = 1;

-- max_key_length and stale_policy are for superusers to set
CREATE ROLE idem_guc_user;
SET ROLE idem_guc_user;
SET idempotency.max_key_length = 1000;
SET idempotency.stale_policy = 'hold';
SET idempotency.lease = '1min';
RESET ROLE;
DROP ROLE idem_guc_user;

-- the worker's settings are for the server configuration (SIGHUP)
SET idempotency.worker_interval = '1s';
SET idempotency.worker_batch_size = 10;
SET idempotency.worker_databases = 'x';
SET idempotency.worker_batch_delay = 0;
SHOW idempotency.worker_batch_delay;
