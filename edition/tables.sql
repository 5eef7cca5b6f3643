/*
 * The SQL edition's tables and index: the C build's 0.4.0 schema, column
 * for column (the request hash, the tokens and the rows are interchangeable
 * between the editions).  Before the functions, whose signatures name the
 * table's row type (idem_lookup returns SETOF idempotency_keys) and whose
 * SQL-language bodies are checked against the tables when created; what
 * calls the functions (the CHECK, the trigger, the view) is in
 * dependents.sql, after them.
 */

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
