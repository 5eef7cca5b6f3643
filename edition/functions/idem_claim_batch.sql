/*
 * idem_claim_batch(keys, requests, scope, lease, retention, wait,
 * max_attempts): claim many keys of one scope in one call (src/batch.c).
 * Each key gets the answer idem_claim would have given it, had the keys
 * been claimed one by one in the order given; the answers come back in that
 * order.  The claims run in the keys' byte order (equal keys in the order
 * given), so two batches sharing keys take their key locks in one order and
 * never deadlock on each other.
 *
 * Every key is checked before any is claimed (22004, 22023, 2202E, 54000,
 * as the C build).  A key already used with another request answers
 * outcome "mismatch" and its status instead of failing the call.
 *
 * With wait => true and no row level security applying to the caller, the
 * keys without a row are written in one INSERT (the C build's
 * InsertNewKeys): the lock of each such key, and of each key whose row
 * idem_claim is to write, in byte order, then the times (after the locks),
 * then INSERT ... ON CONFLICT DO NOTHING of the new ones.
 * Every other key goes through idem_claim (await_result 0: a batch does not
 * wait for keys in flight).  The rows the call wrote are moved forward at
 * its end when it may have waited after writing them (idem__restamp).
 *
 * Differences from the C build:
 * - A wait is not measured (PL/pgSQL cannot see time asleep, which the C
 *   build reads from /proc/self/schedstat): the rows are moved forward when
 *   the INSERT took longer than 10 ms plus 200 us a row (a loaded server
 *   runs the 3,000-row INSERT of sql/batch.sql in 50 to 90 us a row), or a
 *   later key's idem_claim longer than 10 ms.  A shorter wait is not
 *   counted (a lease may then count from up to that long before the call
 *   ends); a merely slow call moves its rows too (one write more a row, the
 *   same times).  A row made final by the attempts limit is not moved.
 * - The keys that have a row are found before the locks, and only the
 *   others are given a token (the C build locks every key and draws a
 *   token for each, then lets go of the locks of keys that had a row;
 *   PL/pgSQL cannot let go of a transaction-level advisory lock): the
 *   token values drawn differ, never their order or uniqueness.  The keys
 *   locked, in byte order before the INSERT, are those without a row and
 *   those whose row the call is to write (idem_claim's renew or takeover:
 *   past its expiry, a stale claim under reclaim, failed retryable, with
 *   the same request as any of the key's items): locking these only later, from idem_claim, while
 *   holding the locks of the new keys after them, let two batches of the
 *   same keys wait on each other in a cycle (40P01) when such a key's row
 *   was deleted between their reads (idem_expire, a release), so that the
 *   other batch saw it new and locked it first.  Keys only read (replay,
 *   in_progress, stale under hold, mismatch) are not locked.
 * - "mismatch" is decided on the row read just before that key's
 *   idem_claim; a row rewritten with another request by a transaction that
 *   commits between that read and idem_claim's fails the call with IK001
 *   (the C build answers mismatch).
 * - The answer bound (54000 past 256 MB) counts each row as 64 bytes, its
 *   key, and its response and recovery point at their full (decompressed)
 *   size; the C build counts the row's exact heap tuple size, so near the
 *   bound the two may differ by a few bytes a row.
 * - Its statements are planned generically whatever the caller's
 *   plan_cache_mode (its SET clause, as idem_record_batch's): a custom plan
 *   copies every array a statement names into the plan, and reads an
 *   element of that copy from its start, so each key's statement (the call
 *   of idem__check_key or idem_claim for v_keys[i], v_requests[j]) cost the
 *   whole batch's size: 10,000 keys of 255 bytes in 4.8 s under
 *   force_custom_plan, which any caller may set, against 0.5 s.
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
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 100
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $idem_claim_batch$
DECLARE
    v_scope constant text := scope;
    v_keys text[] := keys;
    v_requests jsonb[] := requests;
    n integer;
    m integer;
    hashes bytea[];
    ord integer[];
    i integer;
    j integer;
    k text;
    v_lease interval;
    v_retention interval;
    now_ts timestamptz;
    stamp timestamptz;
    lease_end timestamptz;
    reclaim boolean;
    new_keys text[] := '{}';
    new_tokens bigint[] := '{}';
    new_hashes bytea[] := '{}';
    lock_keys text[] := '{}';
    all_keys text[] := '{}';
    all_hashes bytea[] := '{}';
    t bigint;
    inserted_key text;
    inserted_token bigint;
    done text[] := '{}';
    done_tokens bigint[] := '{}';
    written_keys text[] := '{}';
    written_tokens bigint[] := '{}';
    waited boolean := false;
    began timestamptz;
    r record;
    c record;
    res_outcome text[];
    res_token bigint[];
    res_status idempotency_status[];
    res_code integer[];
    res_response jsonb[];
    res_retry interval[];
    res_rp text[];
    answer_bytes bigint := 0;
    act text;
    locks_full boolean := false;
    sorted_tokens bigint[];
BEGIN
    /* the arguments, in the C build's order */
    IF v_scope IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'idempotency scope must not be null',
            HINT = 'The default scope is the empty string.';
    END IF;
    PERFORM idem__check_key('k', v_scope);
    IF wait IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'wait must not be null';
    END IF;
    IF v_keys IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'keys must not be null';
    END IF;
    IF pg_catalog.array_ndims(v_keys) OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION USING ERRCODE = '2202E', MESSAGE = 'keys must be a one-dimensional array';
    END IF;
    n := pg_catalog.cardinality(v_keys);
    IF n OPERATOR(pg_catalog.>) 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '54000', MESSAGE = 'a batch holds at most 10000 keys',
            DETAIL = pg_catalog.format('keys has %s elements.', n),
            HINT = 'Split the keys into several batches.';
    END IF;
    IF n OPERATOR(pg_catalog.>) 0 AND pg_catalog.array_lower(v_keys, 1) OPERATOR(pg_catalog.<>) 1 THEN
        v_keys := ARRAY(SELECT pg_catalog.unnest(v_keys));
    END IF;
    IF v_requests IS NOT NULL THEN
        IF pg_catalog.array_ndims(v_requests) OPERATOR(pg_catalog.>) 1 THEN
            RAISE EXCEPTION USING ERRCODE = '2202E', MESSAGE = 'requests must be a one-dimensional array';
        END IF;
        m := pg_catalog.cardinality(v_requests);
        IF m OPERATOR(pg_catalog.>) 10000 THEN
            RAISE EXCEPTION USING ERRCODE = '54000', MESSAGE = 'a batch holds at most 10000 keys',
                DETAIL = pg_catalog.format('requests has %s elements.', m),
                HINT = 'Split the keys into several batches.';
        END IF;
        IF m OPERATOR(pg_catalog.<>) n THEN
            RAISE EXCEPTION USING ERRCODE = '2202E', MESSAGE = 'requests must have one element per key',
                DETAIL = pg_catalog.format('%s keys, %s requests.', n, m),
                HINT = 'Pass NULL for the keys without a request, or leave requests out.';
        END IF;
        IF m OPERATOR(pg_catalog.>) 0 AND pg_catalog.array_lower(v_requests, 1) OPERATOR(pg_catalog.<>) 1 THEN
            v_requests := ARRAY(SELECT pg_catalog.unnest(v_requests));
        END IF;
    END IF;
    hashes := pg_catalog.array_fill(NULL::bytea, ARRAY[n]);
    FOR i IN 1 .. n LOOP
        IF v_keys[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'idempotency key must not be null';
        END IF;
        PERFORM idem__check_key(v_keys[i], v_scope);
        IF v_requests IS NOT NULL AND v_requests[i] IS NOT NULL THEN
            hashes[i] := COALESCE(
                --@ request_hash_fast DOC=v_requests[i]
                , idem_request_hash(v_requests[i]));
        END IF;
    END LOOP;
    IF n OPERATOR(pg_catalog.=) 0 THEN
        RETURN;
    END IF;

    /* the arguments every claim shares, named by the first key (IdemClaimArgsInit) */
    v_lease := COALESCE(lease, idem__lease());
    v_retention := COALESCE(retention, idem__retention());
    now_ts := pg_catalog.clock_timestamp();
    PERFORM idem__check_interval(v_lease, 'lease', now_ts, v_keys[1], v_scope);
    PERFORM idem__check_interval(v_retention, 'retention', now_ts OPERATOR(pg_catalog.+) v_lease, v_keys[1], v_scope);
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_claim_batch() in a read-only transaction';
    END IF;
    IF max_attempts OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_attempts must not be negative',
            DETAIL = pg_catalog.format('Key "%s" in scope "%s".', v_keys[1], v_scope),
            HINT = '0 means no limit.';
    END IF;
    PERFORM idem__check_row_security();
    reclaim := idem__stale_reclaim();

    /* the keys in byte order, equal keys in the order given */
    SELECT pg_catalog.array_agg(s.i ORDER BY v_keys[s.i] COLLATE "C", s.i) INTO ord
      FROM pg_catalog.generate_series(1, n) AS s(i);

    res_outcome := pg_catalog.array_fill(NULL::text, ARRAY[n]);
    res_token := pg_catalog.array_fill(NULL::bigint, ARRAY[n]);
    res_status := pg_catalog.array_fill(NULL::idempotency_status, ARRAY[n]);
    res_code := pg_catalog.array_fill(NULL::integer, ARRAY[n]);
    res_response := pg_catalog.array_fill(NULL::jsonb, ARRAY[n]);
    res_retry := pg_catalog.array_fill(NULL::interval, ARRAY[n]);
    res_rp := pg_catalog.array_fill(NULL::text, ARRAY[n]);

    /*
     * The new keys in one statement (InsertNewKeys): only with wait => true
     * and without row level security (under it each key goes through
     * idem_claim, which refuses a scope the caller may not use before it
     * takes any key's lock).
     */
    IF wait AND NOT pg_catalog.row_security_active('idempotency_keys'::pg_catalog.regclass) THEN
        FOR i IN 1 .. n LOOP
            j := ord[i];
            k := v_keys[j];
            all_keys := all_keys OPERATOR(pg_catalog.||) k;
            all_hashes := all_hashes OPERATOR(pg_catalog.||) hashes[j];
            CONTINUE WHEN i OPERATOR(pg_catalog.>) 1 AND k OPERATOR(pg_catalog.=) v_keys[ord[i OPERATOR(pg_catalog.-) 1]];
            new_keys := new_keys OPERATOR(pg_catalog.||) k;
            new_hashes := new_hashes OPERATOR(pg_catalog.||) hashes[j];
        END LOOP;
        /*
         * the keys that have a row are left to idem_claim; of those, the
         * ones it is to write (DecideClaim's renew and takeover, the
         * attempts limit included) are locked here with the new keys, in
         * byte order, so that the call never waits for a key's lock while
         * holding the lock of a key after it; a key given twice is locked
         * when any of its requests would write it (an earlier one, with
         * another request, answering mismatch)
         */
        now_ts := pg_catalog.clock_timestamp();
        SELECT COALESCE(pg_catalog.array_agg(u.k ORDER BY u.o) FILTER (WHERE x.key IS NULL), '{}'),
               COALESCE(pg_catalog.array_agg(u.h ORDER BY u.o) FILTER (WHERE x.key IS NULL), '{}')
          INTO new_keys, new_hashes
          FROM ROWS FROM (pg_catalog.unnest(new_keys), pg_catalog.unnest(new_hashes)) WITH ORDINALITY AS u(k, h, o)
          LEFT JOIN idempotency_keys x
            ON x.scope OPERATOR(pg_catalog.=) v_scope AND x.key OPERATOR(pg_catalog.=) u.k;
        SELECT COALESCE(pg_catalog.array_agg(g.k ORDER BY g.o), '{}') INTO lock_keys
          FROM (SELECT u.k, pg_catalog.min(u.o) AS o
                  FROM ROWS FROM (pg_catalog.unnest(all_keys), pg_catalog.unnest(all_hashes)) WITH ORDINALITY AS u(k, h, o)
                  LEFT JOIN idempotency_keys x
                    ON x.scope OPERATOR(pg_catalog.=) v_scope AND x.key OPERATOR(pg_catalog.=) u.k
                 WHERE x.key IS NULL
                    OR (x.expires_at OPERATOR(pg_catalog.<=) now_ts
                        AND (reclaim OR x.status OPERATOR(pg_catalog.<>) 'processing'))
                    OR ((x.request_hash OPERATOR(pg_catalog.=) u.h OR (x.request_hash IS NULL AND u.h IS NULL))
                        AND ((x.status OPERATOR(pg_catalog.=) 'failed' AND x.retryable)
                             OR (reclaim AND x.status OPERATOR(pg_catalog.=) 'processing'
                                 AND (x.locked_until IS NULL OR x.locked_until OPERATOR(pg_catalog.<=) now_ts))))
                 GROUP BY u.k) AS g;
        FOREACH k IN ARRAY lock_keys LOOP
            /* past the 64 key locks a transaction holds, idem__lock_key takes none (wait => true) */
            IF NOT locks_full THEN
                locks_full := idem__key_locks_held() OPERATOR(pg_catalog.>=) 64;
                IF NOT locks_full THEN
                    PERFORM idem__lock_key(v_scope, k, true);
                END IF;
            END IF;
        END LOOP;
        IF pg_catalog.cardinality(new_keys) OPERATOR(pg_catalog.>) 0 THEN
            FOREACH k IN ARRAY new_keys LOOP
                --@ next_token VAR=t SEQ=idempotency_token_seq
                new_tokens := new_tokens OPERATOR(pg_catalog.||) t;
            END LOOP;
            /* the times, after the locks */
            stamp := pg_catalog.clock_timestamp();
            lease_end := stamp OPERATOR(pg_catalog.+) v_lease;
            FOR inserted_key, inserted_token IN
                INSERT INTO idempotency_keys AS x (scope, key, status, token, locked_until,
                                                   created_at, updated_at, expires_at, request_hash, due_at)
                SELECT v_scope, u.k, 'processing', u.t, lease_end, stamp, stamp,
                       lease_end OPERATOR(pg_catalog.+) v_retention, u.h, lease_end
                  FROM ROWS FROM (pg_catalog.unnest(new_keys), pg_catalog.unnest(new_tokens), pg_catalog.unnest(new_hashes)) AS u(k, t, h)
                ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING
                RETURNING x.key, x.token
            LOOP
                done := done OPERATOR(pg_catalog.||) inserted_key;
                done_tokens := done_tokens OPERATOR(pg_catalog.||) inserted_token;
            END LOOP;
            written_keys := done;
            written_tokens := done_tokens;
            /* each key's token, in byte order, where the INSERT wrote it */
            SELECT pg_catalog.array_agg(d.t ORDER BY s.i) INTO sorted_tokens
              FROM pg_catalog.generate_series(1, n) AS s(i)
              LEFT JOIN ROWS FROM (pg_catalog.unnest(done), pg_catalog.unnest(done_tokens)) AS d(k, t)
                ON d.k OPERATOR(pg_catalog.=) v_keys[ord[s.i]];
            /* an INSERT slower than its work: it may have waited for another writer's row */
            waited := (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) stamp)
                      OPERATOR(pg_catalog.>) ('10 ms'::interval
                         OPERATOR(pg_catalog.+) ('200 us'::interval OPERATOR(pg_catalog.*) pg_catalog.cardinality(new_keys)));
        END IF;
    END IF;

    FOR i IN 1 .. n LOOP
        j := ord[i];
        k := v_keys[j];
        IF sorted_tokens[i] IS NOT NULL
           AND NOT (i OPERATOR(pg_catalog.>) 1 AND k OPERATOR(pg_catalog.=) v_keys[ord[i OPERATOR(pg_catalog.-) 1]]) THEN
            /* written by the INSERT (the first of equal keys): new */
            res_outcome[j] := 'new';
            res_token[j] := sorted_tokens[i];
            res_status[j] := 'processing';
        ELSE
            /*
             * The row as it is now, and what idem_claim would decide of it
             * (DecideClaim): a claim that only reads (replay, in_progress,
             * stale) is answered here from the row; a request other than
             * the row's answers mismatch; a claim that writes (no row,
             * renew, takeover, the attempts limit) is idem_claim's.
             */
            now_ts := pg_catalog.clock_timestamp();
            SELECT x.status, x.retryable, x.response_code, x.response, x.locked_until,
                   x.expires_at, x.request_hash, x.recovery_point
              INTO r FROM idempotency_keys x
             WHERE x.scope OPERATOR(pg_catalog.=) v_scope AND x.key OPERATOR(pg_catalog.=) k;
            IF NOT FOUND
               OR (r.expires_at OPERATOR(pg_catalog.<=) now_ts
                   AND (reclaim OR r.status OPERATOR(pg_catalog.<>) 'processing')) THEN
                act := 'claim';
            ELSIF r.request_hash IS DISTINCT FROM hashes[j] THEN
                act := 'mismatch';
            ELSIF r.status OPERATOR(pg_catalog.=) 'completed'
                  OR (r.status OPERATOR(pg_catalog.=) 'failed' AND NOT r.retryable) THEN
                act := 'replay';
            ELSIF r.status OPERATOR(pg_catalog.=) 'processing' AND r.locked_until OPERATOR(pg_catalog.>) now_ts THEN
                act := 'in_progress';
            ELSIF r.status OPERATOR(pg_catalog.=) 'processing' AND NOT reclaim THEN
                act := 'stale';
            ELSE
                act := 'claim';
            END IF;
            IF act OPERATOR(pg_catalog.<>) 'claim' THEN
                res_outcome[j] := act;
                res_status[j] := r.status;
                IF act OPERATOR(pg_catalog.=) 'replay' THEN
                    res_code[j] := r.response_code;
                    res_response[j] := r.response;
                ELSIF act OPERATOR(pg_catalog.=) 'in_progress' THEN
                    res_retry[j] := r.locked_until OPERATOR(pg_catalog.-) now_ts;
                ELSIF act OPERATOR(pg_catalog.=) 'stale' THEN
                    res_rp[j] := r.recovery_point;
                END IF;
            ELSE
                began := pg_catalog.clock_timestamp();
                SELECT * INTO c FROM idem_claim(k, v_requests[j], v_scope, v_lease, v_retention, wait,
                                                '0'::interval, max_attempts);
                IF (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) began) OPERATOR(pg_catalog.>) '10 ms'::interval THEN
                    waited := true;		/* it may have waited: the rows written before it move */
                END IF;
                res_outcome[j] := c.outcome;
                res_token[j] := c.token;
                res_status[j] := c.status;
                res_code[j] := c.response_code;
                res_response[j] := c.response;
                res_retry[j] := c.retry_after;
                res_rp[j] := c.recovery_point;
                IF c.token IS NOT NULL THEN
                    written_keys := written_keys OPERATOR(pg_catalog.||) k;
                    written_tokens := written_tokens OPERATOR(pg_catalog.||) c.token;
                END IF;
            END IF;
        END IF;
        /* the answers kept until the last key, bounded (BATCH_MAX_ANSWER_BYTES) */
        answer_bytes := answer_bytes OPERATOR(pg_catalog.+) 64
            OPERATOR(pg_catalog.+) pg_catalog.octet_length(k)
            OPERATOR(pg_catalog.+) COALESCE(pg_catalog.pg_column_size(res_response[j]), 0)
            OPERATOR(pg_catalog.+) COALESCE(pg_catalog.pg_column_size(res_rp[j]), 0);
        IF answer_bytes OPERATOR(pg_catalog.>) 268435456 THEN
            RAISE EXCEPTION USING ERRCODE = '54000',
                MESSAGE = 'the stored responses and recovery points of the batch''s keys are too large to answer in one call',
                DETAIL = 'A batch answers with at most 256 MB, counting each stored response and recovery point at its full (decompressed) size.',
                HINT = 'Claim these keys in smaller batches, or one by one.';
        END IF;
    END LOOP;

    /* every lease written counts from after the batch's last wait */
    IF waited AND pg_catalog.cardinality(written_keys) OPERATOR(pg_catalog.>) 0 THEN
        PERFORM idem__restamp(v_scope, written_keys, written_tokens, 'epoch'::timestamptz);
    END IF;

    FOR i IN 1 .. n LOOP
        key := v_keys[i];
        outcome := res_outcome[i];
        token := res_token[i];
        status := res_status[i];
        response_code := res_code[i];
        response := res_response[i];
        retry_after := res_retry[i];
        recovery_point := res_rp[i];
        RETURN NEXT;
    END LOOP;
END
$idem_claim_batch$;
COMMENT ON FUNCTION idem_claim_batch(text[], jsonb[], text, interval, interval, boolean, integer) IS
    'Claims many keys of one scope: a row per key, in the order given, as idem_claim would answer each; outcome mismatch for a key used with another request';
