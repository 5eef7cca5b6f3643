/* idempotency--0.2.0--0.3.0.sql: one due-time index, so that completes are HOT updates */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.3.0'" to load this file. \quit

/*
 * The two indexes expiry used are replaced by one on due_at, which
 * completing, failing, heartbeating and checkpointing leave as it is, so
 * those updates are HOT when the page has room (the default fillfactor
 * does best: see the README's Performance).  The CHECK constraint goes: the functions never write a
 * processing row without a lease, and its expression cost every write.
 *
 * due_at: when expiry next needs to look at the row.  Added with a constant
 * default, so without rewriting the table or holding its lock for longer
 * than a catalog change: every existing row is due at once (-infinity), and
 * expiry (the worker, or idem_expire()) gives each its due time in
 * batches, as it does for a row written by hand.
 *
 * Each statement runs under EXECUTE, for Citus.  Citus carries DDL on a
 * distributed table to its shards and to the other nodes' copies of the
 * table, and for some statements (DROP INDEX) it sends the statement's
 * query string as it is; in an extension script that string is the whole
 * script, which the workers refuse ("cannot insert multiple commands into
 * a prepared statement"): the update failed.  Under EXECUTE the query
 * string is the one statement.  Citus then runs ALTER EXTENSION UPDATE on
 * every worker too, with its DDL propagation off: there the table is the
 * coordinator's copy, already changed (with the shards) in this same
 * transaction, so a worker leaves it alone.  Where Citus has not
 * distributed the table, or is not installed, this is the plain DDL.
 */
DO $table$
DECLARE
    citus_worker boolean := false;
    stmt text;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        -- a worker: its Citus group is not the coordinator's (0)
        EXECUTE 'SELECT groupid OPERATOR(pg_catalog.<>) 0 AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid OPERATOR(pg_catalog.=) $1) FROM pg_catalog.pg_dist_local_group'
            INTO citus_worker USING 'idempotency_keys'::regclass;
    END IF;
    IF citus_worker THEN
        -- run on a worker by hand (or without the coordinator's change): the
        -- shards would be left behind
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                        WHERE attrelid OPERATOR(pg_catalog.=) 'idempotency_keys'::regclass
                          AND attname OPERATOR(pg_catalog.=) 'due_at' AND NOT attisdropped) THEN
            RAISE EXCEPTION 'idempotency_keys is distributed by Citus: update the extension on the coordinator'
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'ALTER EXTENSION idempotency UPDATE on the coordinator changes the table and its shards on every node, and updates the extension on every worker.';
        END IF;
        RETURN;
    END IF;
    FOREACH stmt IN ARRAY ARRAY[
        'DROP INDEX idempotency_keys_expires_at_idx',
        'DROP INDEX idempotency_keys_lease_idx',
        'ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_lease_check',
        'ALTER TABLE idempotency_keys ADD COLUMN due_at timestamptz NOT NULL DEFAULT ''-infinity''',
        'CREATE INDEX idempotency_keys_due_at_idx ON idempotency_keys (due_at)']
    LOOP
        EXECUTE stmt;
    END LOOP;
END
$table$;

COMMENT ON COLUMN idempotency_keys.due_at IS 'When expiry next needs to look at the row: at or before the lease end while processing, at or before expires_at after; kept by the functions and by expiry (-infinity: due now)';
COMMENT ON INDEX idempotency_keys_due_at_idx IS 'Finds rows whose lease ran out or whose retention ended';

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

CREATE OR REPLACE VIEW idempotency_stats AS
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

/*
 * The C functions set search_path to pg_catalog, pg_temp themselves, as
 * the SET clause did, for exactly the span of their own statements
 * (src/store.c, IdemPinSearchPath), which spares each call the function
 * manager's SET clause handling (3,400 instructions of a claim).  Inside
 * an extension script Citus does not carry ALTER FUNCTION to the workers;
 * it runs this update on each of them itself.
 */
ALTER FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean) RESET search_path;
ALTER FUNCTION idem_complete(text, integer, jsonb, text, bigint) RESET search_path;
ALTER FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) RESET search_path;
ALTER FUNCTION idem_heartbeat(text, text, bigint, interval) RESET search_path;
ALTER FUNCTION idem_release(text, text, bigint) RESET search_path;
ALTER FUNCTION idem_checkpoint(text, text, text, bigint) RESET search_path;
ALTER FUNCTION idem_resolve(text, text, text, integer, jsonb) RESET search_path;
ALTER FUNCTION idem_lookup(text, text) RESET search_path;
ALTER FUNCTION idem_expire(integer) RESET search_path;
ALTER FUNCTION idem_stats() RESET search_path;
ALTER FUNCTION idem_stats_reset() RESET search_path;
