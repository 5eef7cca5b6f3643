-- A session with standard_conforming_strings off (a legacy application's
-- setting; any role may SET it): every function answers as under on.  The
-- SQL edition's functions are compiled in the caller's session, so a
-- pattern written '\s' there would mean 's' (its literals are E'' strings:
-- test/edition/); the C build's hash is C.  The hashes below are the C
-- build's under on, and no literal here has a backslash.
-- (PostgreSQL 19 no longer takes off: expected/string_settings_1.out)
SET standard_conforming_strings = off;
CREATE TABLE sso_t (id int);
-- requests that differ only in amount hash apart; the canonical form's
-- trailing zeros, quotes and spaces as under on
SELECT idem_request_hash('{"amount": 10000, "f": [0.10, 0.20, 0.30, 0.40, 0.50]}'::jsonb)
     = idem_request_hash('{"amount": 90000, "f": [0.10, 0.20, 0.30, 0.40, 0.50]}'::jsonb) AS collide;
SELECT encode(idem_request_hash(jsonb_build_object('q', 'a' || chr(92) || chr(34) || 'b', 'n', 1.50, 'm', 2.0, 'e', 1e3, 'z', 0.000)), 'hex') AS h1;
SELECT encode(idem_request_hash('{"b": [1.10, 20.0], "a": {"x": "y z", "w": 0.0}}'::jsonb), 'hex') AS h2;
SELECT encode(idem_request_hash('{"b": [1.10, 20.0], "a": {"x": "y z", "w": 0.0}}'::text), 'hex') AS h3;
-- a key with a control character is refused, one without is not
SELECT outcome FROM idem_claim('sso' || chr(1), NULL, 'sso');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_claim('sso-1', '{"amount": 10000}', 'sso');
SELECT outcome FROM idem_claim('sso-1', '{"amount": 90000}', 'sso');
\echo :LAST_ERROR_SQLSTATE
-- idem_execute reads the statement's first word as under on
SELECT outcome FROM idem_execute('sso-2', NULL, 'sso', 200, 'show search_path');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome, response FROM idem_execute('sso-3', NULL, 'sso', 201,
    '  /* a comment */ INSERT INTO sso_t VALUES (1) RETURNING id');
-- a setting with a space before its unit
BEGIN;
SET LOCAL idempotency.lease = '5 min';
SELECT outcome FROM idem_claim('sso-4', NULL, 'sso');
SELECT extract(epoch FROM locked_until - created_at) AS lease_s FROM idempotency_keys WHERE scope = 'sso' AND key = 'sso-4';
ROLLBACK;
DELETE FROM idempotency_keys WHERE scope = 'sso';
DROP TABLE sso_t;
RESET standard_conforming_strings;
