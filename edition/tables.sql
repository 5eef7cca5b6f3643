/*
 * The SQL edition's tables, indexes, trigger and view: the C build's 0.4.0
 * schema, column for column (the request hash, the tokens and the rows are
 * interchangeable between the editions).  After the functions, which the
 * table's CHECK, the trigger and the view call.
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
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (scope, key),
    CONSTRAINT idempotency_keys_storable CHECK (idem_row_storable(response, recovery_point, request_hash))
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
CREATE TRIGGER idempotency_row_security_restored
    AFTER INSERT ON idempotency_row_security
    FOR EACH STATEMENT EXECUTE FUNCTION idem_row_security_restored();

CREATE VIEW idempotency_stats AS
SELECT s.*,
       (SELECT pg_catalog.count(*) FROM idempotency_keys k
         WHERE k.status OPERATOR(pg_catalog.=) 'processing') AS processing_keys,
       (SELECT pg_catalog.count(*) FROM idempotency_keys k
         WHERE k.due_at OPERATOR(pg_catalog.<=) pg_catalog.now()
           AND k.status OPERATOR(pg_catalog.=) 'processing'
           AND k.locked_until OPERATOR(pg_catalog.<=) pg_catalog.now()) AS stale_processing_keys,
       (SELECT pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(k.created_at) FROM idempotency_keys k
         WHERE k.status OPERATOR(pg_catalog.=) 'processing') AS oldest_processing_age,
       idem_table_bytes() AS table_bytes
  FROM idem_stats() s;
COMMENT ON VIEW idempotency_stats IS
    'What the extension did in this database (counters since stats_reset) and the state of idempotency_keys now';

/*
 * The SQL edition only: the database's secret for key lock ids (common.sql,
 * idem__key_lock_secret), 32 random bytes drawn at install.  No role but
 * the owner may read it: a key lock id is a keyed hash of (scope, key)
 * under it, so that no tenant can compute another scope's key lock ids.
 */
CREATE TABLE idempotency_key_lock_secret (
    one    boolean PRIMARY KEY DEFAULT true CHECK (one),
    secret bytea NOT NULL CHECK (pg_catalog.octet_length(secret) OPERATOR(pg_catalog.=) 32)
);
COMMENT ON TABLE idempotency_key_lock_secret IS
    'SQL edition: the secret key lock ids are derived under; readable by its owner only';
INSERT INTO idempotency_key_lock_secret (secret)
SELECT pg_catalog.decode(pg_catalog.replace(pg_catalog.gen_random_uuid()::text OPERATOR(pg_catalog.||)
                                            pg_catalog.gen_random_uuid()::text, '-', ''), 'hex');
REVOKE ALL ON TABLE idempotency_key_lock_secret FROM PUBLIC;
