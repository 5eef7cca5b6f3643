/*
 * idem_stats(), idem_stats_databases(), idem_stats_reset(): the counters.
 * The SQL edition has no shared memory, so it answers as the C build
 * answers without shared_preload_libraries (sql/no_preload.sql): a row of
 * NULLs, no rows, and 55000.  The idempotency_stats view's gauges
 * (processing_keys, stale_processing_keys, oldest_processing_age,
 * table_bytes) are read from the table and work as ever.
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
    OUT stats_reset timestamptz,
    OUT attempts_exhausted bigint,
    OUT claims_awaited bigint)
RETURNS record
LANGUAGE sql VOLATILE PARALLEL RESTRICTED
SET search_path FROM CURRENT
AS $idem_stats$
SELECT NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
       NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
       NULL::bigint, NULL::bigint, NULL::timestamptz, NULL::timestamptz, NULL::bigint, NULL::bigint
$idem_stats$;
COMMENT ON FUNCTION idem_stats() IS
    'Counters of this database behind the idempotency_stats view';

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
LANGUAGE sql VOLATILE PARALLEL RESTRICTED ROWS 4
SET search_path FROM CURRENT
AS $idem_stats_databases$
SELECT NULL::oid, NULL::name, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
       NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
       NULL::bigint, NULL::bigint, NULL::bigint, NULL::timestamptz, NULL::timestamptz,
       NULL::bigint, NULL::bigint
 WHERE false
$idem_stats_databases$;
COMMENT ON FUNCTION idem_stats_databases() IS
    'The idempotency counters of every database of the server (dbid NULL: databases counted together when idempotency.stats_max_databases ran out)';

CREATE FUNCTION idem_stats_reset()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $idem_stats_reset$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = 'idempotency statistics are not kept',
        HINT = 'The SQL edition keeps no counters (it has no shared memory); the C build, preloaded, does.';
END
$idem_stats_reset$;
COMMENT ON FUNCTION idem_stats_reset() IS
    'Zeroes this database''s idempotency_stats counters, and forgets those of dropped databases';
