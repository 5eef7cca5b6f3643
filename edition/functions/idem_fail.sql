/*
 * idem_fail(key, scope, token, response_code, response, retryable):
 * processing -> failed, as idem_complete (idem_complete.sql: the token, the
 * time taken before the guarded UPDATE and moved on after a wait, the
 * retention carried over, due_at).  Retryable lets the next claim take the
 * key over; otherwise the stored error is replayed.
 */
CREATE FUNCTION idem_fail(
    key text,
    scope text DEFAULT '',
    token bigint DEFAULT NULL,
    response_code integer DEFAULT NULL,
    response jsonb DEFAULT NULL,
    retryable boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_fail$
DECLARE
    v_key constant text := key;
    v_scope constant text := scope;
    v_token bigint;
    stamp timestamptz;
BEGIN
    PERFORM idem__check_key(v_key, v_scope);
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_fail() in a read-only transaction';
    END IF;
    IF retryable IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'retryable must not be null',
            DETAIL = pg_catalog.format('Key "%s" in scope "%s".', v_key, v_scope);
    END IF;
    IF pg_catalog.pg_column_size(response) OPERATOR(pg_catalog.>) 8188
       OR pg_catalog.pg_column_compression(response) IS NOT NULL THEN
        PERFORM _idem_record_check_response(response, v_key, v_scope);
    END IF;
    PERFORM idem__check_row_security();
    v_token := COALESCE(token, _idem_record_token('idem_fail', v_key, v_scope));
    stamp := pg_catalog.clock_timestamp();
    UPDATE idempotency_keys AS k
       SET status = 'failed', retryable = idem_fail.retryable,
           response_code = idem_fail.response_code, response = idem_fail.response,
           --@ settle_times STAMP=stamp
     WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
       AND k.token OPERATOR(pg_catalog.=) v_token
       AND k.status OPERATOR(pg_catalog.<>) 'completed' AND k.status OPERATOR(pg_catalog.<>) 'failed';
    IF NOT FOUND THEN
        PERFORM _idem_record_no_match('idem_fail', v_key, v_scope, v_token);
    END IF;
    /* the UPDATE waited (another writer of the row): count from now */
    IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) stamp OPERATOR(pg_catalog.>) '10 ms'::interval THEN
        PERFORM idem__restamp(v_scope, ARRAY[v_key], ARRAY[v_token], stamp);
    END IF;
END
$idem_fail$;
COMMENT ON FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) IS
    'Records a failed attempt: retryable lets the next claim take over, otherwise the error is replayed';
