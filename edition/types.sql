/*
 * The SQL edition's objects that come before its functions (some return
 * the table's row type): the roles, the status type, the token sequence and
 * the tables, as the C build's 0.4.0 schema has them, column for column (the
 * request hash, the tokens and the rows are interchangeable between the
 * editions).  The table's CHECK, the trigger and the view call functions:
 * they are made after them (tables.sql).
 */

/*
 * The schema the functions go into must not be one every role may CREATE
 * in (public of a database made before PostgreSQL 15 is): a role that may
 * would put an overload there that a caller's call, or a call between the
 * extension's own functions, resolves to before the extension's (a better
 * match for its arguments' types), and so run its code as that caller, a
 * superuser included.  Refused when PUBLIC may; a warning names any other
 * role but the installer, superusers and the database's owner that may,
 * the schema's owner included (the DBA's to trust).  PostgreSQL's own advice since
 * CVE-2018-1058: REVOKE CREATE ON SCHEMA public FROM PUBLIC.
 */
DO $schema_check$
DECLARE
    target oid := (SELECT n.oid FROM pg_catalog.pg_namespace n
                    WHERE n.nspname OPERATOR(pg_catalog.=) pg_catalog.current_schema());
    writers text;
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
                WHERE n.oid OPERATOR(pg_catalog.=) target
                  AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
                  AND a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'insufficient_privilege',
            MESSAGE = pg_catalog.format('every role may create objects in schema %I, where idempotency would be installed',
                                        pg_catalog.current_schema()),
            DETAIL = 'A function or operator another role creates there could run in place of idempotency''s, as its caller.',
            HINT = pg_catalog.format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC; (PostgreSQL''s default since 15), or install into a schema only its owner may create in.',
                                     pg_catalog.current_schema());
    END IF;
    SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname) INTO writers
      FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a, pg_catalog.pg_roles r
     WHERE n.oid OPERATOR(pg_catalog.=) target
       AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
       AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner
       AND r.oid OPERATOR(pg_catalog.=) a.grantee
       AND r.rolname OPERATOR(pg_catalog.<>) CURRENT_USER
       AND NOT r.rolsuper;
    /*
     * The schema's owner may create there too, and drop what is there; not
     * pg_database_owner (public's, from PostgreSQL 15 on: the database's
     * owner, whom owning the database makes trusted already)
     */
    SELECT pg_catalog.concat_ws(', ', writers, pg_catalog.quote_ident(r.rolname) OPERATOR(pg_catalog.||) ' (its owner)') INTO writers
      FROM pg_catalog.pg_namespace n, pg_catalog.pg_roles r
     WHERE n.oid OPERATOR(pg_catalog.=) target
       AND r.oid OPERATOR(pg_catalog.=) n.nspowner
       AND r.rolname OPERATOR(pg_catalog.<>) 'pg_database_owner'
       AND r.rolname OPERATOR(pg_catalog.<>) CURRENT_USER
       AND NOT r.rolsuper;
    IF COALESCE(writers, '') OPERATOR(pg_catalog.<>) '' THEN
        RAISE WARNING USING
            MESSAGE = pg_catalog.format('roles %s may create objects in schema %I, where idempotency is installed',
                                        writers, pg_catalog.current_schema()),
            DETAIL = 'A function or operator they create there could run in place of idempotency''s, as its caller.',
            HINT = 'Install into a schema only the installing role (or a superuser) may create in, or trust them as much as that role.';
    END IF;
END
$schema_check$;

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

CREATE TABLE idempotency_keys (
    scope          text NOT NULL DEFAULT '',
    key            text NOT NULL,
    status         idempotency_status NOT NULL,
    retryable      boolean NOT NULL DEFAULT true,
    response_code  integer,
    token          bigint NOT NULL,
    locked_until   timestamptz,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    request_hash   bytea,
    recovery_point text,
    response       jsonb,
    due_at         timestamptz NOT NULL DEFAULT '-infinity',
    attempts       integer NOT NULL DEFAULT 1,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (scope, key)
);
COMMENT ON TABLE idempotency_keys IS
    'One row per idempotency key: its status, request hash, stored response, lease and fencing token';
COMMENT ON COLUMN idempotency_keys.scope IS 'Tenant, merchant or account the key belongs to ('''' by default)';
COMMENT ON COLUMN idempotency_keys.key IS 'Client-generated Idempotency-Key';
COMMENT ON COLUMN idempotency_keys.status IS 'processing, completed or failed';
COMMENT ON COLUMN idempotency_keys.retryable IS 'For failed rows: true lets the next claim take the key over, false replays the stored error';
COMMENT ON COLUMN idempotency_keys.response_code IS 'Stored response code (HTTP status) replayed to duplicates';
COMMENT ON COLUMN idempotency_keys.token IS 'Fencing token of the current claim; larger for every new claim of the key';
COMMENT ON COLUMN idempotency_keys.locked_until IS 'End of the lease while processing';
COMMENT ON COLUMN idempotency_keys.created_at IS 'When the key was first claimed';
COMMENT ON COLUMN idempotency_keys.updated_at IS 'When the row last changed';
COMMENT ON COLUMN idempotency_keys.expires_at IS 'The row may be deleted after this; a claim after it starts afresh';
COMMENT ON COLUMN idempotency_keys.request_hash IS 'SHA-256 of the canonical request (idem_request_hash), NULL when none was given';
COMMENT ON COLUMN idempotency_keys.recovery_point IS 'How far a multi-step request got (idem_checkpoint)';
COMMENT ON COLUMN idempotency_keys.response IS 'Stored response body replayed to duplicates';
COMMENT ON COLUMN idempotency_keys.due_at IS 'When expiry next needs to look at the row: at or before the lease end while processing, at or before expires_at after; kept by the functions and by expiry (-infinity: due now)';
COMMENT ON COLUMN idempotency_keys.attempts IS 'Claims that started work on the key: 1 for the first, one more at each takeover (idempotency.max_attempts limits them)';

/* Lets expiry find rows whose lease ran out or whose retention ended. */
CREATE INDEX idempotency_keys_due_at_idx ON idempotency_keys (due_at);
COMMENT ON INDEX idempotency_keys_due_at_idx IS 'Finds rows whose lease ran out or whose retention ended';

/*
 * The row level security policies of idempotency_keys, kept for pg_dump as
 * the C build keeps them (docs/tenants.md): restoring the rows puts the
 * policies back (the trigger), and until they are back the key functions
 * refuse with IK006.
 */
CREATE TABLE idempotency_row_security (
    policy     name    PRIMARY KEY,
    permissive boolean NOT NULL,
    command    text    NOT NULL CHECK (command IN ('ALL', 'SELECT', 'INSERT', 'UPDATE', 'DELETE')),
    roles      name[]  NOT NULL,
    using_expr text,
    check_expr text
);
COMMENT ON TABLE idempotency_row_security IS
    'The row level security policies of idempotency_keys, kept for pg_dump (idem_save_row_security)';
