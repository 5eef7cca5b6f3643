/* idempotency--0.1.0--0.2.0.sql: idem_execute, the one-round-trip path */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.2.0'" to load this file. \quit

/*
 * idem_execute runs the caller's statement, which must resolve names with
 * the caller's search_path: so no SET search_path clause here.  The C pins
 * search_path itself around the extension's own statements, which are
 * schema-qualified anyway.
 */
CREATE FUNCTION idem_execute(
    key text,
    request jsonb,
    scope text,
    success_code integer,
    query text,
    VARIADIC args "any",
    OUT outcome text,
    OUT token bigint,
    OUT status idempotency_status,
    OUT response_code integer,
    OUT response jsonb,
    OUT retry_after interval,
    OUT recovery_point text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_execute'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_execute(text, jsonb, text, integer, text, "any") IS
    'Claims the key and, when new, runs the statement with the given arguments, stores its result row as the response and completes: one round trip';

CREATE FUNCTION idem_execute(
    key text,
    request jsonb,
    scope text,
    success_code integer,
    query text,
    OUT outcome text,
    OUT token bigint,
    OUT status idempotency_status,
    OUT response_code integer,
    OUT response jsonb,
    OUT retry_after interval,
    OUT recovery_point text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_execute'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_execute(text, jsonb, text, integer, text) IS
    'Claims the key and, when new, runs the statement (no arguments), stores its result row as the response and completes: one round trip';

REVOKE ALL ON FUNCTION idem_execute(text, jsonb, text, integer, text, "any") FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_execute(text, jsonb, text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_execute(text, jsonb, text, integer, text, "any") TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_execute(text, jsonb, text, integer, text) TO idempotency_app;
