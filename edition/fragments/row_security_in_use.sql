-- row_security_in_use (edition/build.sh expands "--@ row_security_in_use
-- SCHEMA=.."): whether idem__check_row_security() has anything to check
-- for this caller: policies are recorded in idempotency_row_security, or
-- row level security applies to the caller on idempotency_keys (whose
-- policies must then be recorded).  row_security_active(), one syscache
-- lookup, rather than a query of pg_class (20,000 instructions a call
-- more): a caller row level security does not apply to (the owner without
-- FORCE, a superuser, BYPASSRLS) is not stopped by policies not recorded,
-- where the C build stops every caller.  SCHEMA is '' or, in a body
-- installed by EXECUTE, _IDEM_SCHEMA_.
(EXISTS (SELECT FROM %SCHEMA%idempotency_row_security)
 OR pg_catalog.row_security_active('%SCHEMA%idempotency_keys'::pg_catalog.regclass))
