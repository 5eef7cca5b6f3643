/* idempotency--0.3.0--0.4.0.sql: row level security that survives pg_dump */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.4.0'" to load this file. \quit

/*
 * idempotency_keys is a member of the extension, so pg_dump writes neither
 * its ENABLE / FORCE ROW LEVEL SECURITY nor its policies: after a dump and
 * restore, every tenant read every other tenant's keys.  The policies are
 * kept here instead, in a configuration table whose rows pg_dump does
 * write (pg_extension_config_dump): idem_save_row_security() records the
 * table's policies, and restoring the rows puts them back on the table
 * (the trigger below: the restore's COPY inserts them).  Until they are
 * back, the key functions refuse to run (IK006), so a restore that skipped
 * the trigger (pg_restore --disable-triggers) fails closed.
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
SELECT pg_catalog.pg_extension_config_dump('idempotency_row_security', '');
REVOKE ALL ON TABLE idempotency_row_security FROM PUBLIC;
-- the key functions read it, as the caller, to see that the policies are in place
GRANT SELECT ON TABLE idempotency_row_security TO idempotency_app;

/*
 * Put the policies recorded in idempotency_row_security on idempotency_keys:
 * ENABLE and FORCE ROW LEVEL SECURITY, and each policy of that name the
 * table lacks.  Returns the policies created.  Policies the table has are
 * left as they are.  All or none: if one cannot be made (a role it names
 * is missing, say), none is, with a WARNING for each, so that the table
 * is left with row level security on and the policies it had (none, after
 * a restore), which shows tenants nothing, rather than with part of them;
 * the key functions then refuse with IK006 until every recorded policy is
 * in place.  The table's owner (or a superuser) runs it.
 */
CREATE FUNCTION idem_restore_row_security()
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $idem_restore_row_security$
DECLARE
    keys regclass := '@extschema@.idempotency_keys'::regclass;
    p record;
    made integer := 0;
    failed name;
    err text;
BEGIN
    IF NOT EXISTS (SELECT FROM @extschema@.idempotency_row_security) THEN
        RETURN 0;
    END IF;
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', keys);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', keys);
    BEGIN
        FOR p IN SELECT * FROM @extschema@.idempotency_row_security ORDER BY policy LOOP
            CONTINUE WHEN EXISTS (SELECT FROM pg_policy WHERE polrelid OPERATOR(pg_catalog.=) keys
                                                          AND polname OPERATOR(pg_catalog.=) p.policy);
            failed := p.policy;
            EXECUTE format('CREATE POLICY %I ON %s AS %s FOR %s TO %s%s%s', p.policy, keys,
                           CASE WHEN p.permissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END, p.command,
                           (SELECT string_agg(CASE WHEN r OPERATOR(pg_catalog.=) 'public' THEN 'PUBLIC'
                                                   ELSE quote_ident(r) END, ', ')
                              FROM unnest(p.roles) AS r),
                           CASE WHEN p.using_expr IS NOT NULL THEN ' USING (' || p.using_expr || ')' ELSE '' END,
                           CASE WHEN p.check_expr IS NOT NULL THEN ' WITH CHECK (' || p.check_expr || ')' ELSE '' END);
            made := made + 1;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS err = MESSAGE_TEXT;
        RAISE WARNING 'could not put policy "%" back on idempotency_keys: %', failed, err
            USING HINT = 'No recorded policy was put back; the key functions refuse (IK006) until they all are. Mend the cause, then run SELECT idem_restore_row_security().';
        RETURN 0;
    END;
    RETURN made;
END
$idem_restore_row_security$;
COMMENT ON FUNCTION idem_restore_row_security() IS
    'Puts the policies recorded in idempotency_row_security back on idempotency_keys (after a restore)';
REVOKE ALL ON FUNCTION idem_restore_row_security() FROM PUBLIC;

/*
 * Record idempotency_keys' policies in idempotency_row_security, replacing
 * what it held; returns the policies recorded.  Run it after every change
 * of the policies.  The expressions are written as pg_get_expr writes
 * them with only pg_catalog on the search path, so every name in them is
 * schema-qualified.
 */
CREATE FUNCTION idem_save_row_security()
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $idem_save_row_security$
DECLARE
    saved integer;
BEGIN
    IF NOT (SELECT relrowsecurity FROM pg_class WHERE oid OPERATOR(pg_catalog.=) '@extschema@.idempotency_keys'::regclass) THEN
        RAISE EXCEPTION 'row level security is not enabled on idempotency_keys'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Enable it and create the policies first (docs/security.md), then save them.';
    END IF;
    DELETE FROM @extschema@.idempotency_row_security;
    INSERT INTO @extschema@.idempotency_row_security (policy, permissive, command, roles, using_expr, check_expr)
    SELECT p.polname, p.polpermissive,
           CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                         WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
           ARRAY(SELECT CASE WHEN r OPERATOR(pg_catalog.=) 0 THEN 'public'::name ELSE a.rolname END
                   FROM unnest(p.polroles) AS r LEFT JOIN pg_roles a ON a.oid OPERATOR(pg_catalog.=) r),
           pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)
      FROM pg_policy p
     WHERE p.polrelid OPERATOR(pg_catalog.=) '@extschema@.idempotency_keys'::regclass;
    GET DIAGNOSTICS saved = ROW_COUNT;
    RETURN saved;
END
$idem_save_row_security$;
COMMENT ON FUNCTION idem_save_row_security() IS
    'Records the row level security policies of idempotency_keys, so that pg_dump keeps them';
REVOKE ALL ON FUNCTION idem_save_row_security() FROM PUBLIC;

/*
 * A restore (pg_restore, psql with a plain dump) writes the recorded rows
 * with COPY, after the table and everything its policies name exist: put
 * the policies back then.  It runs as the role restoring, which owns the
 * extension's objects (it created the extension).
 */
CREATE FUNCTION idem_row_security_restored()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $idem_row_security_restored$
BEGIN
    PERFORM @extschema@.idem_restore_row_security();
    RETURN NULL;
END
$idem_row_security_restored$;
COMMENT ON FUNCTION idem_row_security_restored() IS
    'Trigger: a restore wrote idempotency_row_security, so its policies go back on idempotency_keys';
REVOKE ALL ON FUNCTION idem_row_security_restored() FROM PUBLIC;
CREATE TRIGGER idempotency_row_security_restored
    AFTER INSERT ON idempotency_row_security
    FOR EACH STATEMENT EXECUTE FUNCTION idem_row_security_restored();

/*
 * The key's lock on Citus: a claim routes a statement to the node that
 * holds the key's shard, and this takes the lock there, under that node's
 * secret and with a lock tag no SQL function takes (claim.c).  It replaces
 * pg_advisory_xact_lock() on an id the caller computed, which any role
 * that read the id in pg_locks could take and hold.
 */
CREATE FUNCTION idem_key_lock(scope text, key text, mode integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_key_lock'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_key_lock(text, text, integer) IS
    'The key lock of (scope, key) on this node: mode 0 waits, 1 tries, 2 tests (internal: claims route it to the key''s shard)';
REVOKE ALL ON FUNCTION idem_key_lock(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_key_lock(text, text, integer) TO idempotency_app;

/*
 * What the functions refuse to store, the table refuses too: a role that
 * writes the table directly (a tenant holds UPDATE) cannot store a
 * response, recovery point or request hash that pg_dump could not write
 * (each row in one piece of at most 1 GB).  Checked for the rows stored
 * before too (one read of the table): a row that breaks it would make
 * every restore of the table fail, and the update fails instead, naming
 * the constraint, until the row is mended.  Not on a table Citus has
 * distributed (see below).
 */
CREATE FUNCTION idem_row_storable(response jsonb, recovery_point text, request_hash bytea)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_row_storable'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION idem_row_storable(jsonb, text, bytea) IS
    'idempotency_keys'' CHECK: a response and recovery point short enough for pg_dump, a request hash of 32 bytes';
REVOKE ALL ON FUNCTION idem_row_storable(jsonb, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_row_storable(jsonb, text, bytea) TO idempotency_app;

DO $constraint$
DECLARE
    distributed boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid OPERATOR(pg_catalog.=) $1)'
            INTO distributed USING '@extschema@.idempotency_keys'::regclass;
    END IF;
    IF distributed THEN
        -- distributed by Citus: the coordinator's ALTER TABLE reaches the
        -- workers before their own update has made idem_row_storable(), and
        -- fails there; a table distributed after a fresh 0.4.0 install has it
        RAISE NOTICE 'idempotency_keys is distributed by Citus: its CHECK idempotency_keys_storable is not added by this update'
            USING HINT = 'The functions still refuse what it refuses; README, Limitations.';
        RETURN;
    END IF;
    EXECUTE 'ALTER TABLE @extschema@.idempotency_keys ADD CONSTRAINT idempotency_keys_storable'
            ' CHECK (@extschema@.idem_row_storable(response, recovery_point, request_hash))';
END
$constraint$;

-- Counters per database (issue 30)
/*
 * The counters are kept per database (they were cluster-wide): the view
 * shows this database's, idem_stats_databases() every database's, and
 * idem_stats_reset() zeroes this database's only.  Two counters more,
 * attempts_exhausted and claims_awaited, at the end of idem_stats()'s
 * columns and the view's.
 */
DROP VIEW idempotency_stats;
DROP FUNCTION idem_stats();
CREATE FUNCTION idem_stats(
    OUT claims_new bigint,
    OUT claims_replay bigint,
    OUT claims_in_progress bigint,
    OUT claims_reclaimed bigint,
    OUT claims_stale bigint,
    OUT request_mismatches bigint,
    OUT completes bigint,
    OUT fails bigint,
    OUT stale_tokens bigint,
    OUT leases_expired bigint,
    OUT rows_deleted bigint,
    OUT worker_passes bigint,
    OUT worker_errors bigint,
    OUT max_batch_rows bigint,
    OUT worker_last_pass timestamptz,
    OUT stats_reset timestamptz,
    OUT attempts_exhausted bigint,
    OUT claims_awaited bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION idem_stats() IS
    'Counters of this database behind the idempotency_stats view';
COMMENT ON FUNCTION idem_stats_reset() IS
    'Zeroes this database''s idempotency_stats counters, and forgets those of dropped databases';

CREATE FUNCTION idem_stats_databases(
    OUT dbid oid,
    OUT datname name,
    OUT claims_new bigint,
    OUT claims_replay bigint,
    OUT claims_in_progress bigint,
    OUT claims_reclaimed bigint,
    OUT claims_stale bigint,
    OUT request_mismatches bigint,
    OUT completes bigint,
    OUT fails bigint,
    OUT stale_tokens bigint,
    OUT leases_expired bigint,
    OUT rows_deleted bigint,
    OUT worker_passes bigint,
    OUT worker_errors bigint,
    OUT max_batch_rows bigint,
    OUT worker_last_pass timestamptz,
    OUT stats_reset timestamptz,
    OUT attempts_exhausted bigint,
    OUT claims_awaited bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_stats_databases'
LANGUAGE C VOLATILE PARALLEL RESTRICTED ROWS 4;
COMMENT ON FUNCTION idem_stats_databases() IS
    'The idempotency counters of every database of the server (dbid NULL: databases counted together when idempotency.stats_max_databases ran out)';

CREATE VIEW idempotency_stats AS
SELECT s.*,
       (SELECT pg_catalog.count(*) FROM idempotency_keys k
         WHERE k.status OPERATOR(pg_catalog.=) 'processing') AS processing_keys,
       (SELECT pg_catalog.count(*) FROM idempotency_keys k
         WHERE k.due_at OPERATOR(pg_catalog.<=) pg_catalog.now()
           AND k.status OPERATOR(pg_catalog.=) 'processing'
           AND k.locked_until OPERATOR(pg_catalog.<=) pg_catalog.now()) AS stale_processing_keys,
       (SELECT pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(k.created_at)
          FROM idempotency_keys k
         WHERE k.status OPERATOR(pg_catalog.=) 'processing') AS oldest_processing_age,
       idem_table_bytes() AS table_bytes
FROM idem_stats() s;
COMMENT ON VIEW idempotency_stats IS
    'What the extension did in this database (counters since stats_reset) and the state of idempotency_keys now';

REVOKE ALL ON FUNCTION idem_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_databases() FROM PUBLIC;
REVOKE ALL ON TABLE idempotency_stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats() TO idempotency_admin;
GRANT EXECUTE ON FUNCTION idem_stats_databases() TO idempotency_admin;
GRANT SELECT ON TABLE idempotency_stats TO idempotency_admin;
