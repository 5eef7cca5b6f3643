/* idempotency--0.3.0.sql: install script of version 0.3.0 (0.2.0 plus idempotency--0.2.0--0.3.0.sql) */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION idempotency" to load this file. \quit

/*
 * Roles are cluster-wide, so a second database that installs the extension
 * finds them already there; create them only when missing.  Neither can log
 * in; grant them to the roles that do.
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

/*
 * Lets expiry find due rows without scanning the table.  The only index
 * besides the primary key, on a column that completing, failing,
 * heartbeating and checkpointing leave as it is, so that those updates are
 * HOT when the page has room.  The default fillfactor (100) does best: a
 * key's complete follows its insert within milliseconds, while the page
 * is still being filled, so 97% of completes found room in a test with 8
 * clients, and with fillfactor 90 a key took 43% more space (table and
 * indexes).
 */
CREATE INDEX idempotency_keys_due_at_idx ON idempotency_keys (due_at);
COMMENT ON INDEX idempotency_keys_due_at_idx IS 'Finds rows whose lease ran out or whose retention ended';

/* Keys are data: pg_dump must keep them, and the token sequence with them. */
SELECT pg_catalog.pg_extension_config_dump('idempotency_keys', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency_token_seq', '');

/*
 * The C functions that run SQL set search_path to pg_catalog, pg_temp
 * themselves, as a SET clause does, for exactly the span of their own
 * statements (src/store.c, IdemPinSearchPath), which spares each call the
 * function manager's SET clause handling (3,400 instructions of a claim);
 * those statements are schema-qualified throughout anyway.  The PL/pgSQL
 * helpers below have the SET clause.
 */
CREATE FUNCTION idem_claim(
    key text,
    request jsonb DEFAULT NULL,
    scope text DEFAULT '',
    lease interval DEFAULT NULL,
    retention interval DEFAULT NULL,
    wait boolean DEFAULT true,
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
COMMENT ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean) IS
    'Claims an idempotency key or reports what is there: outcome new, replay, in_progress, reclaimed or stale';

CREATE FUNCTION idem_complete(
    key text,
    response_code integer,
    response jsonb,
    scope text DEFAULT '',
    token bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_complete'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_complete(text, integer, jsonb, text, bigint) IS
    'Records the response of a processing claim (processing -> completed); duplicates replay it';

CREATE FUNCTION idem_fail(
    key text,
    scope text DEFAULT '',
    token bigint DEFAULT NULL,
    response_code integer DEFAULT NULL,
    response jsonb DEFAULT NULL,
    retryable boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) IS
    'Records a failed attempt: retryable lets the next claim take over, otherwise the error is replayed';

CREATE FUNCTION idem_heartbeat(
    key text,
    scope text DEFAULT '',
    token bigint DEFAULT NULL,
    lease interval DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_heartbeat'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_heartbeat(text, text, bigint, interval) IS
    'Extends the lease of a processing claim the caller still holds; returns the new lease end';

CREATE FUNCTION idem_release(
    key text,
    scope text DEFAULT '',
    token bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_release(text, text, bigint) IS
    'Gives up a processing claim (deletes it) so the next claim starts afresh; holder only';

CREATE FUNCTION idem_checkpoint(
    key text,
    recovery_point text,
    scope text DEFAULT '',
    token bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_checkpoint'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_checkpoint(text, text, text, bigint) IS
    'Records how far a multi-step request got; a reclaimed claim returns it';

CREATE FUNCTION idem_resolve(
    key text,
    scope text,
    action text,
    response_code integer DEFAULT NULL,
    response jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_resolve'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_resolve(text, text, text, integer, jsonb) IS
    'Operator settles a stuck processing key: action fail (replay the given error) or release (delete it)';

CREATE FUNCTION idem_lookup(
    key text,
    scope text DEFAULT '')
RETURNS SETOF idempotency_keys
AS 'MODULE_PATHNAME', 'idem_lookup'
LANGUAGE C STABLE PARALLEL RESTRICTED ROWS 1;
COMMENT ON FUNCTION idem_lookup(text, text) IS
    'The row of a key, or no row';

CREATE FUNCTION idem_request_hash(request jsonb)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_request_hash_jsonb'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_request_hash(jsonb) IS
    'SHA-256 of the canonical form of a JSON request: equal documents hash equal whatever their key order or spacing';

CREATE FUNCTION idem_request_hash(request bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_request_hash_bytea'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_request_hash(bytea) IS
    'SHA-256 of the request bytes as given';

CREATE FUNCTION idem_request_hash(request text)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_request_hash_text'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION idem_request_hash(text) IS
    'SHA-256 of the request text as given (its bytes in the database encoding)';

CREATE FUNCTION idem_expire(max_rows integer DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_expire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_expire(integer) IS
    'One pass of the expiry work in this database: stale processing rows made takeover-ready, rows past expires_at deleted; returns rows changed';

/*
 * Privileges.  PUBLIC gets nothing.  idempotency_app may use the key
 * functions; the functions run as the caller (SECURITY INVOKER), so row
 * level security on idempotency_keys applies to them as to plain SQL.
 * idempotency_admin (a member of idempotency_app) may also settle keys and
 * run expiry by hand.
 */
REVOKE ALL ON TABLE idempotency_keys FROM PUBLIC;
REVOKE ALL ON SEQUENCE idempotency_token_seq FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_complete(text, integer, jsonb, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_heartbeat(text, text, bigint, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_release(text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_checkpoint(text, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_resolve(text, text, text, integer, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_lookup(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_expire(integer) FROM PUBLIC;

GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE idempotency_keys TO idempotency_app;
GRANT USAGE ON SEQUENCE idempotency_token_seq TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_complete(text, integer, jsonb, text, bigint) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_heartbeat(text, text, bigint, interval) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_release(text, text, bigint) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_checkpoint(text, text, text, bigint) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_lookup(text, text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION idem_resolve(text, text, text, integer, jsonb) TO idempotency_admin;
GRANT EXECUTE ON FUNCTION idem_expire(integer) TO idempotency_admin;

/*
 * Statistics.  The counters are cluster-wide and kept in shared memory only
 * when the library is preloaded (NULL otherwise); the rest is read from the
 * table when the view is queried: stale_processing_keys through the due_at
 * index, processing_keys and oldest_processing_age by reading the table
 * (no index covers status, so that completing a key stays a HOT update).
 */
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
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION idem_stats() IS
    'Counters behind the idempotency_stats view';

CREATE FUNCTION idem_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION idem_stats_reset() IS
    'Zeroes the idempotency_stats counters';

/*
 * The size of idempotency_keys with its indexes and TOAST: on a table
 * Citus has distributed, the size of every shard on every node (read with
 * connections to the other nodes as the caller, so a login role); on a
 * plain server, the table's.
 */
CREATE FUNCTION idem_table_bytes()
RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $idem_table_bytes$
DECLARE
    keys regclass;
    bytes bigint;
BEGIN
    SELECT pg_catalog.format('%I.idempotency_keys', n.nspname)::regclass INTO keys
      FROM pg_extension e JOIN pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
     WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency';
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT pg_catalog.citus_total_relation_size(logicalrelid)'
                ' FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1'
            INTO bytes USING keys;
        IF bytes IS NOT NULL THEN
            RETURN bytes;
        END IF;
    END IF;
    RETURN pg_catalog.pg_total_relation_size(keys);
END
$idem_table_bytes$;
COMMENT ON FUNCTION idem_table_bytes() IS
    'Size of idempotency_keys with its indexes: every shard on every node where Citus distributed it';
REVOKE ALL ON FUNCTION idem_table_bytes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_table_bytes() TO idempotency_admin;

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
    'What the extension did (cluster-wide counters since stats_reset) and the state of idempotency_keys now';

REVOKE ALL ON FUNCTION idem_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_reset() FROM PUBLIC;
REVOKE ALL ON TABLE idempotency_stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats() TO idempotency_admin;
GRANT EXECUTE ON FUNCTION idem_stats_reset() TO idempotency_admin;
GRANT SELECT ON TABLE idempotency_stats TO idempotency_admin;


/*
 * idem_execute runs the caller's statement, which must resolve names with
 * the caller's search_path: the C pins search_path around the extension's
 * own statements only.
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

/*
 * Citus: distribute idempotency_keys by scope, co-located with the table
 * colocate_with (the payments table, distributed by the tenant column),
 * and, with delegate, each key function by its scope argument, so that an
 * autocommit call made on the coordinator runs on the worker that holds the
 * key.  Safe to call again: a table already distributed by scope is left
 * as it is, functions already distributed are distributed again (Citus
 * allows it).  Run on the coordinator, by the extension's owner.
 */
CREATE FUNCTION idem_distribute(colocate_with regclass DEFAULT NULL, delegate boolean DEFAULT true)
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
        FOREACH f IN ARRAY ARRAY[
            'idem_claim(text,jsonb,text,interval,interval,boolean)',
            'idem_complete(text,integer,jsonb,text,bigint)',
            'idem_fail(text,text,bigint,integer,jsonb,boolean)',
            'idem_heartbeat(text,text,bigint,interval)',
            'idem_release(text,text,bigint)',
            'idem_checkpoint(text,text,text,bigint)',
            'idem_resolve(text,text,text,integer,jsonb)',
            'idem_lookup(text,text)',
            'idem_execute(text,jsonb,text,integer,text,"any")',
            'idem_execute(text,jsonb,text,integer,text)']
        LOOP
            EXECUTE 'SELECT pg_catalog.create_distributed_function($1, ''scope'', colocate_with => $2)'
                USING pg_catalog.format('%I.%s', nsp, f)::regprocedure, keys::text;
        END LOOP;
    END IF;
END
$idem_distribute$;
COMMENT ON FUNCTION idem_distribute(regclass, boolean) IS
    'Citus: distributes idempotency_keys by scope, co-located with colocate_with, and (delegate) each key function by its scope argument';
REVOKE ALL ON FUNCTION idem_distribute(regclass, boolean) FROM PUBLIC;
