/*
 * idem_resolve(key, scope, action, response_code, response): an operator
 * (idempotency_admin: the grant is the only check, as in the C build)
 * settles a processing key, or one the attempts limit made final.  'fail'
 * makes it failed, not retryable, with the given response replayed to
 * later claims, under a new token so the old holder is fenced off, kept
 * for idempotency.retention from now (taken before the guarded UPDATE and
 * moved on after a wait, as in idem_complete.sql); 'release' deletes it so
 * the next claim is new.
 */
CREATE FUNCTION idem_resolve(
    key text,
    scope text,
    action text,
    response_code integer DEFAULT NULL,
    response jsonb DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_resolve$
DECLARE
    v_key constant text := key;
    v_scope constant text := scope;
    v_retention interval;
    new_token bigint;
    stamp timestamptz;
BEGIN
    PERFORM idem__check_key(v_key, v_scope);
    IF action IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'action must not be null',
            DETAIL = pg_catalog.format('Key "%s" in scope "%s".', v_key, v_scope),
            HINT = 'The action is ''fail'' or ''release''.';
    END IF;
    IF action OPERATOR(pg_catalog.<>) 'fail' AND action OPERATOR(pg_catalog.<>) 'release' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('invalid action "%s"', action),
            DETAIL = pg_catalog.format('Key "%s" in scope "%s".', v_key, v_scope),
            HINT = 'The action is ''fail'' or ''release''.';
    END IF;
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_resolve() in a read-only transaction';
    END IF;
    IF pg_catalog.pg_column_size(response) OPERATOR(pg_catalog.>) 8188
       OR pg_catalog.pg_column_compression(response) IS NOT NULL THEN
        PERFORM _idem_record_check_response(response, v_key, v_scope);
    END IF;
    v_retention := idem__retention();
    PERFORM idem__check_row_security();

    IF action OPERATOR(pg_catalog.=) 'release' THEN
        DELETE FROM idempotency_keys AS k
         WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
           AND k.status OPERATOR(pg_catalog.<>) 'completed'
           AND (k.status OPERATOR(pg_catalog.<>) 'failed'
                OR (NOT k.retryable AND k.response OPERATOR(pg_catalog.->>) 'error' OPERATOR(pg_catalog.=) 'attempts_exhausted'));
        IF NOT FOUND THEN
            PERFORM _idem_record_no_match('idem_resolve'::pg_catalog.text, v_key, v_scope, NULL::pg_catalog.int8);
        END IF;
        RETURN;
    END IF;

    /* 'fail': a new token, drawn before the statement as the C build draws it */
    --@ next_token VAR=new_token SEQ=idempotency_token_seq
    stamp := pg_catalog.clock_timestamp();
    UPDATE idempotency_keys AS k
       SET status = 'failed', retryable = false, token = new_token,
           response_code = idem_resolve.response_code, response = idem_resolve.response,
           locked_until = NULL, updated_at = stamp, expires_at = stamp OPERATOR(pg_catalog.+) v_retention,
           due_at = LEAST(k.due_at, stamp OPERATOR(pg_catalog.+) v_retention)
     WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
       AND k.status OPERATOR(pg_catalog.<>) 'completed'
       AND (k.status OPERATOR(pg_catalog.<>) 'failed'
            OR (NOT k.retryable AND k.response OPERATOR(pg_catalog.->>) 'error' OPERATOR(pg_catalog.=) 'attempts_exhausted'));
    IF NOT FOUND THEN
        PERFORM _idem_record_no_match('idem_resolve'::pg_catalog.text, v_key, v_scope, NULL::pg_catalog.int8);
    END IF;
    /* the UPDATE waited (another writer of the row): count from now */
    IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) stamp OPERATOR(pg_catalog.>) '10 ms'::interval THEN
        PERFORM idem__restamp(v_scope, ARRAY[v_key], ARRAY[new_token], stamp);
    END IF;
END
$idem_resolve$;
COMMENT ON FUNCTION idem_resolve(text, text, text, integer, jsonb) IS
    'Operator settles a stuck processing key: action fail (replay the given error) or release (delete it)';
