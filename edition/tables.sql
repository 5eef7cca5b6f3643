/*
 * What comes after the SQL edition's functions: the CHECK of
 * idempotency_keys (idem_row_storable), the trigger that puts restored
 * policies back, the view over idem_stats(), and the edition's own
 * key-lock secret.
 */

ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_storable
    CHECK (idem_row_storable(response, recovery_point, request_hash));

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
 * The SQL edition only: the database's values of the two settings a caller
 * may not change for itself (idem__setting), for a server where its owner
 * may not store them with ALTER DATABASE ... SET: PostgreSQL 15 and later
 * let only a superuser, or a role granted SET on it, store a setting it
 * does not know, and a managed service's admin user is neither.  The
 * table's owner writes it; a value stored for the database or a role
 * (pg_db_role_setting) comes first.  A value is checked where it is read,
 * as a stored setting's is: a wrong one makes the calls that read it fail
 * (22023), never the default.
 */
CREATE TABLE idempotency_settings (
    name  text PRIMARY KEY
          CHECK (name OPERATOR(pg_catalog.=) 'idempotency.stale_policy'
                 OR name OPERATOR(pg_catalog.=) 'idempotency.max_key_length'),
    value text NOT NULL CHECK (value OPERATOR(pg_catalog.<>) '')   -- ('' reads as not set)
);
COMMENT ON TABLE idempotency_settings IS
    'SQL edition: the database''s idempotency.stale_policy and idempotency.max_key_length, where ALTER DATABASE cannot store them; written by its owner';
REVOKE ALL ON TABLE idempotency_settings FROM PUBLIC;
GRANT SELECT ON TABLE idempotency_settings TO idempotency_app;

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

/*
 * The SQL edition only: proofs that a key-lock probe row passed its
 * caller's policies (idem__key_lock_proved, idem__key_lock_secret).  Rows
 * live only inside the probe's subtransaction, which always rolls back.
 */
CREATE UNLOGGED TABLE idempotency_key_lock_proof (
    xid   xid8 NOT NULL,
    scope text NOT NULL
);
COMMENT ON TABLE idempotency_key_lock_proof IS
    'SQL edition: a key-lock probe''s proof that its caller may use the scope; never committed';
/*
 * Each probe looks for its own proof: by this index, it never steps over
 * another transaction's (a tenant's transaction left open with proofs of
 * its own rows, or the dead rows of rolled-back probes before a vacuum).
 */
CREATE INDEX idempotency_key_lock_proof_xid_idx ON idempotency_key_lock_proof (xid, scope);
REVOKE ALL ON TABLE idempotency_key_lock_proof FROM PUBLIC;
/*
 * Only a row of token 0 fires it (no claim's token is 0); the function
 * itself then looks for the probe's key.  (The shortest WHEN: every INSERT
 * reads and prepares it again, the key's test too.)
 */
CREATE TRIGGER idempotency_key_lock_probe
    AFTER INSERT ON idempotency_keys
    FOR EACH ROW WHEN (NEW.token OPERATOR(pg_catalog.=) 0)
    EXECUTE FUNCTION idem__key_lock_proved();
/*
 * A proof never commits: the probe's subtransaction rolls back, and with
 * it this trigger's event; a proof still there at the end of the statement
 * (SET CONSTRAINTS ... IMMEDIATE) or at commit came from a row a caller
 * wrote itself, and the transaction fails (idem__key_lock_proof_kept).
 */
CREATE CONSTRAINT TRIGGER idempotency_key_lock_proof_kept
    AFTER INSERT ON idempotency_key_lock_proof
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION idem__key_lock_proof_kept();
