/*
 * The SQL edition's objects that come before its functions: the roles, the
 * status type and the token sequence, exactly as the C build makes them.
 */

/*
 * Roles are cluster-wide, so a second database (or the C build) may have
 * made them already; create them only when missing.  Neither can log in;
 * grant them to the roles that do.  Creating them needs CREATEROLE: where
 * the installing role lacks it (a database owner with no other privilege,
 * as on Neon, Cloud SQL or Azure when the service's admin role did not
 * lend it), the script stops here, changing nothing, and says how to have
 * the service's admin role create them first.
 */
DO $roles$
BEGIN
    IF NOT (EXISTS (SELECT FROM pg_catalog.pg_roles
                    WHERE rolname OPERATOR(pg_catalog.=) 'idempotency_app')
            AND EXISTS (SELECT FROM pg_catalog.pg_roles
                        WHERE rolname OPERATOR(pg_catalog.=) 'idempotency_admin'))
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_roles
                       WHERE rolname OPERATOR(pg_catalog.=) CURRENT_USER
                         AND (rolcreaterole OR rolsuper)) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('the roles idempotency_app and idempotency_admin must exist before role %I can install idempotency',
                                        CURRENT_USER),
            DETAIL = pg_catalog.format('Role %I may not create roles (it has no CREATEROLE), and the roles are cluster-wide.',
                                       CURRENT_USER),
            HINT = 'As a role with CREATEROLE (the service''s admin role), run: CREATE ROLE idempotency_app NOLOGIN; '
                   'CREATE ROLE idempotency_admin NOLOGIN IN ROLE idempotency_app; then install again.';
    END IF;
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
