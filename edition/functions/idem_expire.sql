/*
 * idem_expire(max_rows): one pass of expiry in this database, in the
 * caller's transaction, as the C build's (src/expire.c, IDEM_STMT_EXPIRE_DUE):
 * in batches of at most 10,000 rows, each the rows due first (due_at <=
 * now, an index range scan), locked SKIP LOCKED so that a row a claim or a
 * holder is writing is left for the next pass and expiry never waits for
 * (nor blocks) them; each row deleted (past expires_at; a processing one
 * only under stale_policy reclaim), expired (a processing row whose lease
 * ran out, under reclaim: failed, retryable, due at expires_at), or given
 * its next due time (never, 9999-12-31, for times that never come: a row
 * written by hand with expires_at infinity, which would otherwise be taken
 * and locked again by every pass under reclaim, in front of the stale
 * claims held).  Under reclaim the stale claims that hold left (due at
 * infinity) are taken too.  Returns the rows expired and deleted; max_rows
 * bounds the rows changed of all kinds (NULL: no limit).  Refuses in a
 * read-only transaction (a standby) as the C build does; the scheduled job
 * (pg_cron) should skip a standby: SELECT idem_expire() WHERE NOT
 * pg_is_in_recovery().
 */
CREATE FUNCTION idem_expire(max_rows integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $idem_expire$
DECLARE
    lim bigint := COALESCE(max_rows, 9223372036854775807);
    total bigint := 0;
    done bigint := 0;
    batch integer;
    n_gone bigint;
    n_stale bigint;
    n_later bigint;
    changed bigint;
    now_ts timestamptz := pg_catalog.clock_timestamp();
    reclaim boolean;
BEGIN
    IF lim OPERATOR(pg_catalog.<=) 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_rows must be positive',
            HINT = 'Leave it NULL for no limit.';
    END IF;
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_expire() in a read-only transaction';
    END IF;
    PERFORM idem__check_row_security();
    reclaim := idem__stale_reclaim();
    WHILE total OPERATOR(pg_catalog.<) lim LOOP
        batch := LEAST(lim OPERATOR(pg_catalog.-) total, 10000);
        WITH due_now AS (
            SELECT k.scope, k.key,
                   CASE WHEN k.expires_at OPERATOR(pg_catalog.<=) now_ts
                             AND (reclaim OR k.status OPERATOR(pg_catalog.<>) 'processing') THEN 'd'
                        WHEN reclaim AND k.status OPERATOR(pg_catalog.=) 'processing'
                             AND (k.locked_until IS NULL OR k.locked_until OPERATOR(pg_catalog.<=) now_ts) THEN 's'
                        ELSE 'r' END AS act,
                   CASE WHEN k.status OPERATOR(pg_catalog.<>) 'processing'
                             AND k.expires_at OPERATOR(pg_catalog.>) now_ts
                             THEN LEAST(k.expires_at, '9999-12-31 00:00:00+00'::timestamptz)
                        WHEN k.status OPERATOR(pg_catalog.=) 'processing'
                             AND k.locked_until OPERATOR(pg_catalog.>) now_ts
                             AND k.expires_at OPERATOR(pg_catalog.>) now_ts
                             THEN LEAST(k.locked_until, k.expires_at, '9999-12-31 00:00:00+00'::timestamptz)
                        ELSE 'infinity'::timestamptz END AS next_due
              FROM idempotency_keys k
             WHERE k.due_at OPERATOR(pg_catalog.<=) now_ts
             ORDER BY k.due_at LIMIT batch
               FOR UPDATE SKIP LOCKED),
        held AS (
            SELECT k.scope, k.key,
                   CASE WHEN k.expires_at OPERATOR(pg_catalog.<=) now_ts THEN 'd'
                        WHEN k.status OPERATOR(pg_catalog.=) 'processing'
                             AND (k.locked_until IS NULL OR k.locked_until OPERATOR(pg_catalog.<=) now_ts) THEN 's'
                        ELSE 'r' END AS act,
                   CASE WHEN k.status OPERATOR(pg_catalog.<>) 'processing'
                             AND k.expires_at OPERATOR(pg_catalog.>) now_ts
                             THEN LEAST(k.expires_at, '9999-12-31 00:00:00+00'::timestamptz)
                        WHEN k.status OPERATOR(pg_catalog.=) 'processing'
                             AND k.locked_until OPERATOR(pg_catalog.>) now_ts
                             AND k.expires_at OPERATOR(pg_catalog.>) now_ts
                             THEN LEAST(k.locked_until, k.expires_at, '9999-12-31 00:00:00+00'::timestamptz)
                        ELSE 'infinity'::timestamptz END AS next_due
              FROM idempotency_keys k
             WHERE reclaim AND k.due_at OPERATOR(pg_catalog.=) 'infinity'::timestamptz
             LIMIT batch
               FOR UPDATE SKIP LOCKED),
        due AS (SELECT * FROM (SELECT * FROM due_now UNION ALL SELECT * FROM held) u LIMIT batch),
        gone AS (DELETE FROM idempotency_keys AS k USING due
                  WHERE k.scope OPERATOR(pg_catalog.=) due.scope AND k.key OPERATOR(pg_catalog.=) due.key
                    AND due.act OPERATOR(pg_catalog.=) 'd' RETURNING 1),
        stale AS (UPDATE idempotency_keys AS k SET status = 'failed', retryable = true,
                         locked_until = NULL, updated_at = now_ts,
                         due_at = LEAST(k.expires_at, '9999-12-31 00:00:00+00'::timestamptz)
                    FROM due
                   WHERE k.scope OPERATOR(pg_catalog.=) due.scope AND k.key OPERATOR(pg_catalog.=) due.key
                     AND due.act OPERATOR(pg_catalog.=) 's' RETURNING 1),
        later AS (UPDATE idempotency_keys AS k SET due_at = due.next_due
                    FROM due
                   WHERE k.scope OPERATOR(pg_catalog.=) due.scope AND k.key OPERATOR(pg_catalog.=) due.key
                     AND due.act OPERATOR(pg_catalog.=) 'r'
                     AND k.due_at IS DISTINCT FROM due.next_due RETURNING 1)
        SELECT (SELECT pg_catalog.count(*) FROM gone), (SELECT pg_catalog.count(*) FROM stale),
               (SELECT pg_catalog.count(*) FROM later)
          INTO n_gone, n_stale, n_later;
        changed := n_gone OPERATOR(pg_catalog.+) n_stale OPERATOR(pg_catalog.+) n_later;
        done := done OPERATOR(pg_catalog.+) n_gone OPERATOR(pg_catalog.+) n_stale;
        total := total OPERATOR(pg_catalog.+) changed;
        EXIT WHEN changed OPERATOR(pg_catalog.<) batch;
    END LOOP;
    RETURN done;
END
$idem_expire$;
COMMENT ON FUNCTION idem_expire(integer) IS
    'One pass of the expiry work in this database: stale processing rows made takeover-ready, rows past expires_at deleted; returns rows changed';
