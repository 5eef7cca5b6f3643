/* idempotency--0.3.0--0.4.0.sql: row level security that survives pg_dump */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.4.0'" to load this file. \quit

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
SET standard_conforming_strings = on
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
 * of the policies, in the same transaction: the key functions refuse
 * (IK006) while they differ.  The expressions are written as pg_get_expr
 * writes them with only pg_catalog on the search path, so every name in
 * them is schema-qualified, and with the settings that change how it
 * writes a constant or a name pinned (the key functions compare them under
 * the same: src/store.c, deparse_settings).
 */
CREATE FUNCTION idem_save_row_security()
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET quote_all_identifiers = off
SET standard_conforming_strings = on
SET DateStyle = 'ISO, MDY'
SET IntervalStyle = postgres
SET TimeZone = 'UTC'
SET extra_float_digits = 1
SET bytea_output = hex
SET lc_monetary = 'C'
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

-- Attempts, and waiting for a result (issue 30)

/*
 * attempts: the claims that started work on the key, 1 for the claim that
 * wrote the row and one more at each takeover (reclaimed); a key that
 * starts afresh after its expiry counts 1 again.  Rows written before
 * count 1.  A constant default, so no rewrite.  Under EXECUTE, and only
 * where the table is not a Citus worker's copy, for the reasons given at
 * due_at in idempotency--0.2.0--0.3.0.sql.
 */
DO $attempts$
DECLARE
    citus_worker boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT groupid OPERATOR(pg_catalog.<>) 0 AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid OPERATOR(pg_catalog.=) $1) FROM pg_catalog.pg_dist_local_group'
            INTO citus_worker USING '@extschema@.idempotency_keys'::regclass;
    END IF;
    IF citus_worker THEN
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                        WHERE attrelid OPERATOR(pg_catalog.=) '@extschema@.idempotency_keys'::regclass
                          AND attname OPERATOR(pg_catalog.=) 'attempts' AND NOT attisdropped) THEN
            RAISE EXCEPTION 'idempotency_keys is distributed by Citus: update the extension on the coordinator'
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'ALTER EXTENSION idempotency UPDATE on the coordinator changes the table and its shards on every node, and updates the extension on every worker.';
        END IF;
        RETURN;
    END IF;
    EXECUTE 'ALTER TABLE @extschema@.idempotency_keys ADD COLUMN attempts integer NOT NULL DEFAULT 1';
END
$attempts$;
COMMENT ON COLUMN idempotency_keys.attempts IS
    'Claims that started work on the key: 1 for the first, one more at each takeover (idempotency.max_attempts limits them)';

/*
 * idem_claim gains await_result (wait that long for a claim in flight to
 * finish, and answer as a duplicate of the finished request) and
 * max_attempts (a takeover past it makes the key final instead).  A new
 * signature, so the function is made again, with its grants (on Citus,
 * see below).
 */
DROP FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean);
CREATE FUNCTION idem_claim(
    key text,
    request jsonb DEFAULT NULL,
    scope text DEFAULT '',
    lease interval DEFAULT NULL,
    retention interval DEFAULT NULL,
    wait boolean DEFAULT true,
    await_result interval DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    OUT outcome text,
    OUT token bigint,
    OUT status idempotency_status,
    OUT response_code integer,
    OUT response jsonb,
    OUT retry_after interval,
    OUT recovery_point text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) IS
    'Claims an idempotency key or reports what is there: outcome new, replay, in_progress, reclaimed or stale';
REVOKE ALL ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) TO idempotency_app;


/*
 * idem_distribute delegates every key function the extension has (a C
 * function with a scope argument), read from the catalog, rather than a
 * list of signatures that each new argument or function would outdate.
 */
CREATE OR REPLACE FUNCTION idem_distribute(colocate_with regclass DEFAULT NULL, delegate boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $idem_distribute$
DECLARE
    nsp text;
    keys regclass;
    keys_column text;
    keys_colocation integer;
    other_colocation integer;
    f text;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in this database'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Preload citus before idempotency, CREATE EXTENSION citus, add the worker nodes, then call idem_distribute() on the coordinator.';
    END IF;
    SELECT n.nspname INTO nsp
      FROM pg_extension e JOIN pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
     WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency';
    keys := pg_catalog.format('%I.idempotency_keys', nsp)::regclass;

    IF colocate_with IS NOT NULL THEN
        EXECUTE 'SELECT colocationid FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1'
            INTO other_colocation USING colocate_with;
        IF other_colocation IS NULL THEN
            RAISE EXCEPTION 'table % is not distributed', colocate_with
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Distribute it by its tenant column first (create_distributed_table), then co-locate the keys with it.';
        END IF;
    END IF;

    EXECUTE 'SELECT pg_catalog.column_to_column_name(logicalrelid, partkey), colocationid'
            ' FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1'
        INTO keys_column, keys_colocation USING keys;
    IF keys_colocation IS NULL THEN
        EXECUTE 'SELECT pg_catalog.create_distributed_table($1, ''scope'', colocate_with => $2)'
            USING keys, coalesce(colocate_with::text, 'default');
    ELSIF keys_column IS DISTINCT FROM 'scope' THEN
        RAISE EXCEPTION 'idempotency_keys is already distributed, by % rather than by scope', coalesce(keys_column, 'no column')
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Undistribute it (undistribute_table) and call idem_distribute() again.';
    ELSIF other_colocation IS DISTINCT FROM keys_colocation AND colocate_with IS NOT NULL THEN
        RAISE EXCEPTION 'idempotency_keys is already distributed, but not co-located with %', colocate_with
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Co-locate them with update_distributed_table_colocation().';
    END IF;

    IF delegate THEN
        -- every key function of the extension: a C function with a scope argument
        FOR f IN
            SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text
              FROM pg_catalog.pg_proc p
              JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                   AND d.objid OPERATOR(pg_catalog.=) p.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'
              JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
             WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency'
               AND p.prolang OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_language WHERE lanname OPERATOR(pg_catalog.=) 'c')
               AND 'scope' OPERATOR(pg_catalog.=) ANY (p.proargnames)
               AND p.proname OPERATOR(pg_catalog.<>) 'idem_key_lock'
             ORDER BY 1
        LOOP
            EXECUTE 'SELECT pg_catalog.create_distributed_function($1, ''scope'', colocate_with => $2)'
                USING f::regprocedure, keys::text;
        END LOOP;
    END IF;
END
$idem_distribute$;
COMMENT ON FUNCTION idem_distribute(regclass, boolean) IS
    'Citus: distributes idempotency_keys by scope, co-located with colocate_with, and (delegate) each key function by its scope argument';
REVOKE ALL ON FUNCTION idem_distribute(regclass, boolean) FROM PUBLIC;


-- Batches (issue 30)

/*
 * Claim many keys of one scope in one call: a row per key, in the order
 * given, each what idem_claim would have answered it had the keys been
 * claimed one by one in that order; a key used with another request
 * answers outcome mismatch instead of failing the call (src/batch.c).  One
 * scope, so that on Citus the batch lies on one shard and a delegated call
 * runs where its keys are.
 */
CREATE FUNCTION idem_claim_batch(
    keys text[],
    requests jsonb[] DEFAULT NULL,
    scope text DEFAULT '',
    lease interval DEFAULT NULL,
    retention interval DEFAULT NULL,
    wait boolean DEFAULT true,
    max_attempts integer DEFAULT NULL,
    OUT key text,
    OUT outcome text,
    OUT token bigint,
    OUT status idempotency_status,
    OUT response_code integer,
    OUT response jsonb,
    OUT retry_after interval,
    OUT recovery_point text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_claim_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;
COMMENT ON FUNCTION idem_claim_batch(text[], jsonb[], text, interval, interval, boolean, integer) IS
    'Claims many keys of one scope: a row per key, in the order given, as idem_claim would answer each; outcome mismatch for a key used with another request';
REVOKE ALL ON FUNCTION idem_claim_batch(text[], jsonb[], text, interval, interval, boolean, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_claim_batch(text[], jsonb[], text, interval, interval, boolean, integer) TO idempotency_app;

/*
 * Record the results of many keys of one scope in one call, all or
 * nothing: each completed, or failed where failed says so.
 */
CREATE FUNCTION idem_record_batch(
    keys text[],
    response_codes integer[],
    responses jsonb[],
    scope text DEFAULT '',
    tokens bigint[] DEFAULT NULL,
    failed boolean[] DEFAULT NULL,
    retryable boolean[] DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_record_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_record_batch(text[], integer[], jsonb[], text, bigint[], boolean[], boolean[]) IS
    'idem_complete (or, where failed, idem_fail) of each key of one scope, all or nothing; a NULL token for a key this transaction claimed';
REVOKE ALL ON FUNCTION idem_record_batch(text[], integer[], jsonb[], text, bigint[], boolean[], boolean[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_record_batch(text[], integer[], jsonb[], text, bigint[], boolean[], boolean[]) TO idempotency_app;

/*
 * On a Citus coordinator whose key functions are delegated (idem_complete
 * stands for them), idem_claim, made again above, and the batch functions
 * are not: create_distributed_function() here would reach the workers
 * before their own update has made the functions, and fail.  Calls of
 * them run on the coordinator, their statements routed to the shards,
 * until idem_distribute() is called again (README, Scaling out).
 */
DO $delegate$
DECLARE
    delegated boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_object') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_object o, pg_catalog.pg_dist_local_group g'
                ' WHERE g.groupid OPERATOR(pg_catalog.=) 0'
                ' AND o.classid OPERATOR(pg_catalog.=) ''pg_catalog.pg_proc''::pg_catalog.regclass'
                ' AND o.objid OPERATOR(pg_catalog.=) $1 AND o.distribution_argument_index IS NOT NULL)'
            INTO delegated
            USING '@extschema@.idem_complete(text,integer,jsonb,text,bigint)'::pg_catalog.regprocedure;
    END IF;
    IF delegated THEN
        RAISE NOTICE 'idem_claim and the batch functions are not delegated to the workers yet'
            USING HINT = 'After the update, call SELECT idem_distribute(); on the coordinator: it delegates every key function.';
    END IF;
END
$delegate$;

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

/*
 * The installing role's default privileges (ALTER DEFAULT PRIVILEGES) give
 * every object it creates to the roles they name: on Supabase's images,
 * anon, authenticated and service_role get ALL on each new table, sequence
 * and function in public, which would let anyone holding the project's
 * public API key read and delete keys.  On a new installation (the key
 * table made in this transaction) no grant but the ones these scripts make
 * can be meant: each other role's is revoked from every object of the
 * extension (PUBLIC's are as the scripts left them).  An installation
 * updated from 0.3.0 keeps its grants, an administrator's own included.
 */
DO $idem_default_privileges$
DECLARE
    r record;
BEGIN
    /*
     * A new installation: the key table became the extension's in this
     * transaction (its pg_depend row, which only CREATE EXTENSION writes:
     * this step's ALTER TABLEs rewrite its pg_class row), perhaps in a
     * subtransaction (psql's ON_ERROR_ROLLBACK, a savepoint), whose id is
     * younger than the transaction's: age() not above 0.
     */
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                      AND d.objid OPERATOR(pg_catalog.=) 'idempotency_keys'::pg_catalog.regclass
                      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                      AND d.deptype OPERATOR(pg_catalog.=) 'e'
                      AND pg_catalog.age(d.xmin) OPERATOR(pg_catalog.<=) 0) THEN
        RETURN;
    END IF;
    FOR r IN
        SELECT DISTINCT o.kind, o.obj, a.grantee
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
          CROSS JOIN LATERAL (
              SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::pg_catalog.regclass::pg_catalog.text,
                     c.relowner, c.relacl
                FROM pg_catalog.pg_class c
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid OPERATOR(pg_catalog.=) d.objid
              UNION ALL
              SELECT 'ROUTINE', p.oid::pg_catalog.regprocedure::pg_catalog.text, p.proowner, p.proacl
                FROM pg_catalog.pg_proc p
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid OPERATOR(pg_catalog.=) d.objid
              UNION ALL
              SELECT 'TYPE', t.oid::pg_catalog.regtype::pg_catalog.text, t.typowner, t.typacl
                FROM pg_catalog.pg_type t
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid OPERATOR(pg_catalog.=) d.objid
          ) AS o(kind, obj, owner, acl)
          CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) AS a
         WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency' AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND a.grantee OPERATOR(pg_catalog.<>) 0 AND a.grantee OPERATOR(pg_catalog.<>) o.owner
           AND a.grantee OPERATOR(pg_catalog.<>) ALL (ARRAY['idempotency_app'::pg_catalog.regrole,
                                                           'idempotency_admin'::pg_catalog.regrole]::pg_catalog.oid[])
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %I', r.kind, r.obj,
                                  pg_catalog.pg_get_userbyid(r.grantee));
    END LOOP;
END
$idem_default_privileges$;

/*
 * Policies made under an earlier version were never recorded, and
 * pg_dump writes none of an extension table's policies: record them now,
 * as idem_save_row_security() would, so that the first dump after the
 * update keeps them (a table without row level security has none to keep).
 */
DO $idem_record_policies$
BEGIN
    IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.idempotency_keys'::pg_catalog.regclass) THEN
        PERFORM @extschema@.idem_save_row_security();
    END IF;
END
$idem_record_policies$;
