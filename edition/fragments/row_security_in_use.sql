-- row_security_in_use (edition/build.sh expands "--@ row_security_in_use
-- SCHEMA=.."): whether idem__check_row_security() has anything to check:
-- policies are recorded in idempotency_row_security, or row level security
-- is on for idempotency_keys (whose policies must then be recorded).
-- SCHEMA is '' or, in a body installed by EXECUTE, _IDEM_SCHEMA_.
(EXISTS (SELECT FROM %SCHEMA%idempotency_row_security)
 OR (SELECT rs_c.relrowsecurity FROM pg_catalog.pg_class rs_c
      WHERE rs_c.oid OPERATOR(pg_catalog.=) '%SCHEMA%idempotency_keys'::pg_catalog.regclass))
