/*
 * idem_record_batch(keys, response_codes, responses, scope, tokens, failed,
 * retryable): idem_complete of each key, or idem_fail where failed says so
 * (retryable unless retryable says not), in the keys' byte order (as
 * idem_claim_batch claims), all or nothing: the first key that cannot be
 * recorded raises its error (IK002 to IK005) and nothing is recorded
 * (src/record.c).  A NULL token (or tokens NULL) stands for this
 * transaction's claim of the key, as for idem_complete.
 *
 * Every argument is checked before anything is recorded (22004, 22023,
 * 2202E, 54000, 25006, as the C build).  Each key is then recorded by the
 * edition's idem_complete / idem_fail; their IK004 names idem_record_batch,
 * as the C build's does (the loop runs in one subtransaction, which turns
 * it into the batch's error; the C build uses none).  The expiries written
 * count from after the batch's last wait: when a key's call took longer
 * than 10 ms (PL/pgSQL cannot tell a wait from work), the rows recorded
 * before it are moved forward at the end (idem__restamp).  Its statements
 * are planned generically whatever the caller's plan_cache_mode (its SET
 * clause): under a custom plan each key's call of idem_complete copied
 * every response of the batch into its plan (2,000 responses of 20 kB in
 * 54 s under force_custom_plan, against 0.6 s).
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
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $idem_record_batch$
DECLARE
    v_scope constant text := scope;
    v_keys text[] := keys;
    v_codes integer[] := response_codes;
    v_responses jsonb[] := responses;
    v_tokens bigint[] := tokens;
    v_failed boolean[] := failed;
    v_retryable boolean[] := retryable;
    n integer;
    m integer;
    i integer;
    j integer;
    what text;
    ndims integer;
    ord integer[];
    began timestamptz;
    waited boolean := false;
    done_keys text[];
    done_tokens bigint[];
    e_state text;
    e_message text;
    e_detail text;
    e_hint text;
BEGIN
    IF v_keys IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'keys must not be null';
    END IF;
    IF v_scope IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'idempotency scope must not be null',
            HINT = 'The default scope is the empty string.';
    END IF;
    PERFORM idem__check_key('k', v_scope);
    /* each array: one dimension, at most 10,000 elements, one per key */
    FOREACH what IN ARRAY ARRAY['keys', 'response_codes', 'responses', 'tokens', 'failed', 'retryable'] LOOP
        CASE what
            WHEN 'keys' THEN ndims := pg_catalog.array_ndims(v_keys); m := pg_catalog.cardinality(v_keys);
            WHEN 'response_codes' THEN ndims := pg_catalog.array_ndims(v_codes); m := pg_catalog.cardinality(v_codes);
            WHEN 'responses' THEN ndims := pg_catalog.array_ndims(v_responses); m := pg_catalog.cardinality(v_responses);
            WHEN 'tokens' THEN ndims := pg_catalog.array_ndims(v_tokens); m := pg_catalog.cardinality(v_tokens);
            WHEN 'failed' THEN ndims := pg_catalog.array_ndims(v_failed); m := pg_catalog.cardinality(v_failed);
            ELSE ndims := pg_catalog.array_ndims(v_retryable); m := pg_catalog.cardinality(v_retryable);
        END CASE;
        CONTINUE WHEN m IS NULL;	/* a NULL array: NULL for every key */
        IF ndims OPERATOR(pg_catalog.>) 1 THEN
            RAISE EXCEPTION USING ERRCODE = '2202E', MESSAGE = pg_catalog.format('%s must be a one-dimensional array', what);
        END IF;
        IF m OPERATOR(pg_catalog.>) 10000 THEN
            RAISE EXCEPTION USING ERRCODE = '54000', MESSAGE = 'a batch holds at most 10000 keys',
                DETAIL = pg_catalog.format('%s has %s elements.', what, m),
                HINT = 'Split the keys into several batches.';
        END IF;
        IF what OPERATOR(pg_catalog.=) 'keys' THEN
            n := m;
        ELSIF m OPERATOR(pg_catalog.<>) n THEN
            RAISE EXCEPTION USING ERRCODE = '2202E', MESSAGE = pg_catalog.format('%s must have one element per key', what);
        END IF;
    END LOOP;
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_record_batch() in a read-only transaction';
    END IF;
    /* subscripts from 1, whatever the arrays' lower bounds */
    IF n OPERATOR(pg_catalog.>) 0 THEN
        IF pg_catalog.array_lower(v_keys, 1) OPERATOR(pg_catalog.<>) 1 THEN v_keys := ARRAY(SELECT pg_catalog.unnest(v_keys)); END IF;
        IF pg_catalog.array_lower(v_codes, 1) OPERATOR(pg_catalog.<>) 1 THEN v_codes := ARRAY(SELECT pg_catalog.unnest(v_codes)); END IF;
        IF pg_catalog.array_lower(v_responses, 1) OPERATOR(pg_catalog.<>) 1 THEN v_responses := ARRAY(SELECT pg_catalog.unnest(v_responses)); END IF;
        IF pg_catalog.array_lower(v_tokens, 1) OPERATOR(pg_catalog.<>) 1 THEN v_tokens := ARRAY(SELECT pg_catalog.unnest(v_tokens)); END IF;
        IF pg_catalog.array_lower(v_failed, 1) OPERATOR(pg_catalog.<>) 1 THEN v_failed := ARRAY(SELECT pg_catalog.unnest(v_failed)); END IF;
        IF pg_catalog.array_lower(v_retryable, 1) OPERATOR(pg_catalog.<>) 1 THEN v_retryable := ARRAY(SELECT pg_catalog.unnest(v_retryable)); END IF;
    END IF;
    FOR i IN 1 .. n LOOP
        IF v_keys[i] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'idempotency key must not be null',
                DETAIL = pg_catalog.format('Key %s of the batch is null.', i);
        END IF;
        PERFORM idem__check_key(v_keys[i], v_scope);
        IF v_responses[i] IS NOT NULL AND NOT idem_row_storable(v_responses[i], NULL::pg_catalog.text, NULL::pg_catalog.bytea) THEN
            RAISE EXCEPTION USING ERRCODE = '54000', MESSAGE = 'response is too large to store',
                DETAIL = pg_catalog.format('The response for key "%s" in scope "%s" is longer than %s MB as text or %s MB as jsonb, or larger than %s kB and nested more than %s levels deep; pg_dump writes each row in one piece of at most 1 GB.',
                                           v_keys[i], v_scope, 256, 64, 8, 16),
                HINT = 'Store a reference to the body, or a digest of it, instead.';
        END IF;
    END LOOP;
    IF n OPERATOR(pg_catalog.=) 0 THEN
        RETURN;
    END IF;
    PERFORM idem__check_row_security();

    /* the keys in byte order, equal keys in the order given */
    SELECT pg_catalog.array_agg(s.i ORDER BY v_keys[s.i] COLLATE "C", s.i) INTO ord
      FROM pg_catalog.generate_series(1, n) AS s(i);
    BEGIN
        FOR i IN 1 .. n LOOP
            j := ord[i];
            began := pg_catalog.clock_timestamp();
            IF v_failed[j] THEN
                PERFORM idem_fail(v_keys[j], v_scope, v_tokens[j], v_codes[j], v_responses[j],
                                  COALESCE(v_retryable[j], true));
            ELSE
                PERFORM idem_complete(v_keys[j], v_codes[j], v_responses[j], v_scope, v_tokens[j]);
            END IF;
            IF (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) began) OPERATOR(pg_catalog.>) '10 ms'::interval
               AND i OPERATOR(pg_catalog.>) 1 THEN
                waited := true;		/* it may have waited: the rows recorded before it move */
            END IF;
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'IK004' THEN
        /* the key's error, as the batch's (the C build names the batch) */
        GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_message = MESSAGE_TEXT,
                                e_detail = PG_EXCEPTION_DETAIL, e_hint = PG_EXCEPTION_HINT;
        RAISE EXCEPTION USING ERRCODE = e_state, MESSAGE = e_message,
            DETAIL = pg_catalog.regexp_replace(e_detail, E' \\((idem_complete|idem_fail)\\)\\.$', ' (idem_record_batch).'),
            HINT = e_hint;
    END;

    /* every expiry written counts from after the batch's last wait */
    IF waited THEN
        SELECT pg_catalog.array_agg(x.key), pg_catalog.array_agg(x.token) INTO done_keys, done_tokens
          FROM idempotency_keys x
         WHERE x.scope OPERATOR(pg_catalog.=) v_scope AND x.key OPERATOR(pg_catalog.=) ANY (v_keys);
        PERFORM idem__restamp(v_scope, done_keys, done_tokens, 'epoch'::timestamptz);
    END IF;
END
$idem_record_batch$;
COMMENT ON FUNCTION idem_record_batch(text[], integer[], jsonb[], text, bigint[], boolean[], boolean[]) IS
    'idem_complete (or, where failed, idem_fail) of each key of one scope, all or nothing; a NULL token for a key this transaction claimed';
