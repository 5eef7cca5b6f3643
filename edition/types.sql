/*
 * The SQL edition's objects that come before its functions: the roles, the
 * status type and the token sequence, exactly as the C build makes them.
 */

/*
 * Roles are cluster-wide, so a second database (or the C build) may have
 * made them already; create them only when missing.  Neither can log in;
 * grant them to the roles that do.
 */
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles
                   WHERE rolname OPERATOR(pg_catalog.=) 'idempotency_app') THEN
        CREATE ROLE idempotency_app NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles
                   WHERE rolname OPERATOR(pg_catalog.=) 'idempotency_admin') THEN
        CREATE ROLE idempotency_admin NOLOGIN IN ROLE idempotency_app;
    END IF;
END
$roles$;

CREATE TYPE idempotency_status AS ENUM ('processing', 'completed', 'failed');
COMMENT ON TYPE idempotency_status IS
    'State of an idempotency key: processing (claimed, work under way), completed (response stored), failed';

/* Fencing tokens: every claim of a key draws a new one, never reused. */
CREATE SEQUENCE idempotency_token_seq AS bigint;
COMMENT ON SEQUENCE idempotency_token_seq IS
    'Source of fencing tokens; dumped with its value so tokens are never handed out twice';
