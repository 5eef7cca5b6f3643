-- The SQL edition only: under row level security a claim proves to
-- idem__key_lock_secret that its caller may use the scope by a probe row
-- (token 0, the key "\x01lock ", the transaction's id and a random part,
-- named in the setting idempotency_edition.probe), whose trigger writes a
-- proof into idempotency_key_lock_proof; the probe rolls back, its proof
-- with it.  A row written as the probe writes it, by a tenant itself with
-- the setting set, must not leave a proof behind (committed proofs would
-- stay for good, and every later probe reads them all): such a proof is
-- refused at commit, or at once under SET CONSTRAINTS ... IMMEDIATE.  A
-- row of token 0 whose key the setting does not name is a row like any
-- other (a restore's COPY writes them back), writes no proof and stands
-- in no probe's way.
\set VERBOSITY terse
CREATE ROLE proof_a NOLOGIN IN ROLE idempotency_app;
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY proof_tenant ON idempotency_keys TO idempotency_app
    USING (scope = current_user) WITH CHECK (scope = current_user);
SELECT idem_save_row_security() AS saved;
SET ROLE proof_a;
-- claims under the policies: their probes' proofs roll back with them
BEGIN;
SELECT outcome FROM idem_claim('p1', NULL, 'proof_a');
SELECT outcome FROM idem_claim('p2', NULL, 'proof_a', wait => false);
COMMIT;
-- a probe's row written by the tenant, the setting naming it: refused at commit
BEGIN;
SELECT set_config('idempotency_edition.probe', E'\x01lock ' || pg_current_xact_id()::text, true) IS NOT NULL AS probing;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ' || pg_current_xact_id()::text, 'processing', 0, now(), now(), now());
COMMIT;
-- deleted again before the commit: the same
BEGIN;
SELECT set_config('idempotency_edition.probe', E'\x01lock ' || pg_current_xact_id()::text, true) IS NOT NULL AS probing;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ' || pg_current_xact_id()::text, 'processing', 0, now(), now(), now());
DELETE FROM idempotency_keys WHERE key = E'\x01lock ' || pg_current_xact_id()::text;
COMMIT;
-- checked at once
BEGIN;
SET CONSTRAINTS ALL IMMEDIATE;
SELECT set_config('idempotency_edition.probe', E'\x01lock ' || pg_current_xact_id()::text, true) IS NOT NULL AS probing;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ' || pg_current_xact_id()::text, 'processing', 0, now(), now(), now());
ROLLBACK;
-- rolled back to a savepoint, as the probe is: the transaction commits
BEGIN;
SAVEPOINT s;
SELECT set_config('idempotency_edition.probe', E'\x01lock ' || pg_current_xact_id()::text, true) IS NOT NULL AS probing;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ' || pg_current_xact_id()::text, 'processing', 0, now(), now(), now());
ROLLBACK TO SAVEPOINT s;
SELECT outcome FROM idem_claim('p3', NULL, 'proof_a');
COMMIT;
-- a caller whose constraints are IMMEDIATE: its claims' probes are not
-- refused, its mode is IMMEDIATE after them, a row of its own is
SELECT outcome FROM idem_claim('p4', NULL, 'proof_a');
BEGIN;
SET CONSTRAINTS ALL IMMEDIATE;
SELECT outcome FROM idem_claim('p5', NULL, 'proof_a');
SELECT outcome FROM idem_claim('p6', NULL, 'proof_a', wait => false);
SELECT set_config('idempotency_edition.probe', E'\x01lock ' || pg_current_xact_id()::text, true) IS NOT NULL AS probing;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ' || pg_current_xact_id()::text, 'processing', 0, now(), now(), now());
ROLLBACK;
BEGIN;
SET CONSTRAINTS ALL IMMEDIATE;
SELECT outcome FROM idem_claim('p5', NULL, 'proof_a');
COMMIT;
-- rows of token 0 whose keys begin as a probe's, the setting not naming
-- them (another id; none; more after it; this transaction's, the setting
-- unset): rows like any other, no proof
BEGIN;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ' || (pg_current_xact_id()::text::bigint + 1), 'processing', 0, now(), now(), now());
ROLLBACK;
BEGIN;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ', 'processing', 0, now(), now(), now());
ROLLBACK;
BEGIN;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ' || pg_current_xact_id()::text || ' ', 'processing', 0, now(), now(), now());
ROLLBACK;
BEGIN;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ' || pg_current_xact_id()::text, 'processing', 0, now(), now(), now());
RESET ROLE;
SELECT count(*) AS own_proofs FROM idempotency_key_lock_proof;
SET ROLE proof_a;
ROLLBACK;
-- committed, with the ids of the transactions to come: no later probe meets them
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
SELECT 'proof_a', E'\x01lock ' || (pg_current_xact_id()::text::bigint + i), 'completed', 0, now(), now(), now() + interval '1 h'
  FROM generate_series(1, 20) i;
SELECT outcome FROM idem_claim('p-after-1', NULL, 'proof_a');
SELECT outcome FROM idem_claim('p-after-2', NULL, 'proof_a');
SELECT outcome FROM idem_claim('p-after-3', NULL, 'proof_a');
BEGIN;
SELECT outcome FROM idem_claim('p-after-4', NULL, 'proof_a');
SELECT outcome FROM idem_claim('p-after-5', NULL, 'proof_a');
COMMIT;
DELETE FROM idempotency_keys WHERE scope = 'proof_a' AND key LIKE E'\x01lock %';
BEGIN;
RESET ROLE;
SELECT count(*) AS proofs_of_lookalikes FROM idempotency_key_lock_proof;
-- the index that serves a probe looking for its own proof
SET LOCAL enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT FROM idempotency_key_lock_proof p
 WHERE p.xid = pg_current_xact_id() AND p.scope = 'proof_a';
SET ROLE proof_a;
SELECT outcome FROM idem_claim('p7', NULL, 'proof_a');
COMMIT;
RESET ROLE;
-- no proof and no probe row left; the claims' rows are there
SELECT count(*) AS proofs FROM idempotency_key_lock_proof;
SELECT count(*) AS probe_rows FROM idempotency_keys WHERE key LIKE E'\x01lock %';
SELECT key, status FROM idempotency_keys WHERE scope = 'proof_a' ORDER BY key;
-- with standard_conforming_strings off (any role may set it; old drivers
-- do), the trigger's function, compiled in this new session, warns of
-- nothing, and writes such a row like any other
-- (PostgreSQL 19 refuses it off: both settings are left alone there)
\c
SELECT current_setting('server_version_num')::int < 190000 AS scs_can_be_off \gset
\if :scs_can_be_off
SET standard_conforming_strings = off;
SET escape_string_warning = on;
\endif
SET ROLE proof_a;
SELECT outcome FROM idem_claim('p8', NULL, 'proof_a');
\set VERBOSITY default
\set SHOW_CONTEXT never
BEGIN;
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at)
VALUES ('proof_a', E'\x01lock ', 'processing', 0, now(), now(), now());
ROLLBACK;
\set VERBOSITY terse
\set SHOW_CONTEXT errors
RESET ROLE;
RESET standard_conforming_strings;
DROP POLICY proof_tenant ON idempotency_keys;
DELETE FROM idempotency_row_security;
ALTER TABLE idempotency_keys DISABLE ROW LEVEL SECURITY;
DELETE FROM idempotency_keys WHERE scope = 'proof_a';
DROP ROLE proof_a;
