/*
 * What a holder does with its claim (idem_complete here; idem_fail,
 * idem_heartbeat, idem_release, idem_checkpoint and the operator's
 * idem_resolve in their files), as the C build's src/record.c, and the
 * helpers they share (_idem_record_*).
 *
 * A holder proves itself with the fencing token its claim returned.  A
 * NULL token stands for the key's current token when this transaction
 * (or one of its subtransactions still in force) wrote the key's row
 * version: its xmin is ours (_idem_record_mine).  The C build remembers
 * the claims the transaction made instead; the two differ only where the
 * transaction wrote the row by another call, or in a subtransaction it
 * rolled back (see _idem_record_token).
 * Each call is guarded by "token = $token AND the row is processing", so a
 * holder whose key was taken over changes nothing; only when that matches
 * no row is the row read again to say why (_idem_record_no_match): no such
 * key (IK004), no token (IK005), another token (IK002), not processing
 * (IK003), in that order.  A call that writes a lease or an expiry takes
 * its time (clock_timestamp()) just before its guarded UPDATE; when the
 * call ends more than 10 ms later (its UPDATE waited for another writer of
 * the row, or the machine was slow), idem__restamp moves the row's times
 * forward to count from then, as the C build's stamp does (src/stamp.c):
 * so they count from after the call's last wait, and a call that did not
 * wait writes the row once.
 */

/*
 * Is the transaction id x (a row version's xmin, of a version visible to
 * the caller's snapshot) this transaction's or one of its live
 * subtransactions'?  Such ids are at or after the top-level id, within
 * 2^31 of it; a visible version whose xmin is still in progress can only
 * be the transaction's own (another's uncommitted write is invisible).
 */
CREATE FUNCTION _idem_record_mine(x xid) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $_idem_record_mine$
DECLARE
    top xid8 := pg_catalog.pg_current_xact_id_if_assigned();
    top_n bigint;
    diff bigint;
BEGIN
    IF top IS NULL OR x IS NULL THEN
        RETURN false;           /* nothing written: no row version is ours */
    END IF;
    IF x OPERATOR(pg_catalog.=) pg_catalog.xid(top) THEN
        RETURN true;
    END IF;
    top_n := top::text::bigint;
    diff := (x::text::bigint OPERATOR(pg_catalog.-) (top_n OPERATOR(pg_catalog.%) 4294967296)
             OPERATOR(pg_catalog.+) 4294967296) OPERATOR(pg_catalog.%) 4294967296;
    IF diff OPERATOR(pg_catalog.>=) 2147483648 THEN
        RETURN false;           /* before the transaction began */
    END IF;
    RETURN pg_catalog.pg_xact_status((top_n OPERATOR(pg_catalog.+) diff)::text::xid8)
           OPERATOR(pg_catalog.=) 'in progress';
END
$_idem_record_mine$;

/*
 * Explain why a holder's call matched no row, by ERROR (the C build's
 * ReportNoMatch).  token NULL: none was given and the transaction did not
 * write the key's row.  For idem_resolve, token is the row's own (so only
 * IK004 or IK003 can come), as the C build passes it.
 */
CREATE FUNCTION _idem_record_no_match(fname text, key text, scope text, token bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $_idem_record_no_match$
DECLARE
    r record;
BEGIN
    SELECT k.status, k.token INTO r FROM idempotency_keys k
     WHERE k.scope OPERATOR(pg_catalog.=) _idem_record_no_match.scope
       AND k.key OPERATOR(pg_catalog.=) _idem_record_no_match.key;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'IK004',
            MESSAGE = 'idempotency key does not exist',
            DETAIL = pg_catalog.format('No key "%s" in scope "%s" (%s).', key, scope, fname),
            HINT = 'It may have expired, been released, or been claimed in another scope.';
    END IF;
    IF fname OPERATOR(pg_catalog.=) 'idem_resolve' THEN
        token := r.token;
    END IF;
    IF token IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'IK005',
            MESSAGE = 'fencing token required',
            DETAIL = pg_catalog.format('Key "%s" in scope "%s" was not claimed in this transaction.', key, scope),
            HINT = 'Pass the token idem_claim returned; it may be left out only in the transaction that made the claim.';
    END IF;
    IF r.token OPERATOR(pg_catalog.<>) token THEN
        RAISE EXCEPTION USING ERRCODE = 'IK002',
            MESSAGE = 'stale fencing token',
            DETAIL = pg_catalog.format('Key "%s" in scope "%s" is no longer held by token %s.', key, scope, token),
            HINT = 'The lease ran out and the key was claimed again, or an operator settled it; this holder must stop.';
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'IK003',
        MESSAGE = 'idempotency key is not processing',
        DETAIL = pg_catalog.format('Key "%s" in scope "%s" is %s.', key, scope,
                                   CASE WHEN r.status OPERATOR(pg_catalog.=) 'completed' THEN 'completed' ELSE 'failed' END),
        HINT = CASE WHEN fname OPERATOR(pg_catalog.=) 'idem_resolve'
                    THEN 'An operator settles a processing key, or one the attempts limit made final.'
                    ELSE 'Only a processing claim can be completed, failed, extended, checkpointed or released.' END;
END
$_idem_record_no_match$;

/*
 * The token a holder's call acts with when it gave none: the key's current
 * token when the row version is this transaction's own (it claimed the
 * key, in it or in a subtransaction not rolled back); otherwise the call
 * fails as the C build's does (IK004 without a row, else IK005).
 *
 * The C build instead lets NULL stand for the token of the transaction's
 * latest claim of the key that wrote its row (new or reclaimed),
 * remembered in memory for the whole transaction; so where this
 * transaction wrote the row otherwise, the two differ:
 *   - after a heartbeat, checkpoint, complete or fail with an explicit
 *     token of a key another transaction claimed: NULL passes here (C: IK005);
 *   - after a claim that made the key final (max_attempts: outcome replay,
 *     no token returned): IK003 here (C: IK005);
 *   - after idem_resolve(.., 'fail') of a key this transaction claimed:
 *     NULL means the resolve's token here, so IK003 (C: IK002);
 *   - after a takeover in a subtransaction rolled back: IK005 here (C:
 *     IK002, the rolled-back claim's token is remembered).
 */
CREATE FUNCTION _idem_record_token(fname text, key text, scope text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $_idem_record_token$
DECLARE
    r record;
BEGIN
    SELECT k.token, k.xmin INTO r FROM idempotency_keys k
     WHERE k.scope OPERATOR(pg_catalog.=) _idem_record_token.scope
       AND k.key OPERATOR(pg_catalog.=) _idem_record_token.key;
    IF FOUND AND _idem_record_mine(r.xmin) THEN
        RETURN r.token;
    END IF;
    PERFORM _idem_record_no_match(fname, key, scope, NULL::pg_catalog.int8);
    RETURN NULL;                /* not reached */
END
$_idem_record_token$;

/*
 * The C build's IdemCheckResponse: 54000 for a response whose text form
 * would be longer than 256 MB (a row pg_dump could not write), judged as
 * the table's CHECK judges it (idem_row_storable), before anything is
 * written.  The callers skip it for a response of at most 8192 bytes that
 * is not compressed.  A compressed one (read from a table) is judged by its
 * size uncompressed, as the C build's toast_raw_datum_size: a copy of it
 * (jsonb_path_query_first(.., '$') builds one, in linear time), since a
 * few kB compressed can print as gigabytes.
 */
CREATE FUNCTION _idem_record_check_response(response jsonb, key text, scope text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $_idem_record_check_response$
DECLARE
    whole jsonb := response;
BEGIN
    IF pg_catalog.pg_column_compression(whole) IS NOT NULL THEN
        whole := pg_catalog.jsonb_path_query_first(whole, '$');
    END IF;
    IF whole IS NOT NULL AND NOT idem_row_storable(whole, NULL::pg_catalog.text, NULL::pg_catalog.bytea) THEN
        RAISE EXCEPTION USING ERRCODE = '54000',
            MESSAGE = 'response is too large to store',
            DETAIL = pg_catalog.format('The response for key "%s" in scope "%s" is longer than %s MB as text or %s MB as jsonb, or larger than %s kB and nested more than %s levels deep; pg_dump writes each row in one piece of at most 1 GB.',
                                       key, scope, 256, 64, 8, 16),
            HINT = 'Store a reference to the body, or a digest of it, instead.';
    END IF;
END
$_idem_record_check_response$;

/*
 * idem_complete(key, response_code, response, scope, token): processing ->
 * completed, the response stored, expires_at = now + the retention the
 * claim asked for (a processing row keeps expires_at = locked_until +
 * retention; computed in epoch seconds as the C build's statement does,
 * exact to the microsecond), due_at lowered to it only if that comes first.
 */
CREATE FUNCTION idem_complete(
    key text,
    response_code integer,
    response jsonb,
    scope text DEFAULT '',
    token bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_complete$
DECLARE
    v_key constant text := key;
    v_scope constant text := scope;
    v_token bigint;
    w_token bigint;
    stamp timestamptz;
    maxlen integer;
    r record;
BEGIN
    /*
     * The common call's checks in one expression: every idempotency.*
     * setting empty (the key's bound 255 bytes), the key and scope well
     * formed, not read-only, a response of at most 8192 bytes not
     * compressed, no row level security recorded.  A check failing or a
     * setting set: the way below checks it all again, raises what it must,
     * and finds the token.  The common call finds no token first: its
     * UPDATE takes the row version this transaction wrote (xmin: as
     * _idem_record_mine's first test) when none was given; when that
     * matches nothing, _idem_record_token and the UPDATE again, as before.
     */
    IF (v_key IS NOT NULL AND v_scope IS NOT NULL
        AND pg_catalog.octet_length(v_key) OPERATOR(pg_catalog.>) 0
        AND pg_catalog.octet_length(v_key) OPERATOR(pg_catalog.<=) 255
        AND pg_catalog.octet_length(v_scope) OPERATOR(pg_catalog.<=) 255
        AND v_key OPERATOR(pg_catalog.!~) E'[\\x01-\\x1f\\x7f]'
        AND v_scope OPERATOR(pg_catalog.!~) E'[\\x01-\\x1f\\x7f]'
        AND COALESCE(pg_catalog.current_setting('idempotency.max_key_length', true), '') OPERATOR(pg_catalog.=) ''
        AND NOT pg_catalog.current_setting('transaction_read_only')::boolean
        AND COALESCE(pg_catalog.pg_column_size(idem_complete.response) OPERATOR(pg_catalog.<=) 8188
                     AND pg_catalog.pg_column_compression(idem_complete.response) IS NULL, true)
        AND NOT
            --@ role_setting_stored NAME='idempotency.max_key_length='
        AND NOT EXISTS (SELECT FROM idempotency_settings t
                         WHERE t.name OPERATOR(pg_catalog.=) 'idempotency.max_key_length')
        AND NOT
            --@ row_security_in_use SCHEMA=
        ) IS NOT TRUE THEN
        --@ check_key KEY=v_key SCOPE=v_scope SCHEMA=
        IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
            RAISE EXCEPTION USING ERRCODE = '25006',
                MESSAGE = 'cannot execute idem_complete() in a read-only transaction';
        END IF;
        IF pg_catalog.pg_column_size(response) OPERATOR(pg_catalog.>) 8188
           OR pg_catalog.pg_column_compression(response) IS NOT NULL THEN
            PERFORM _idem_record_check_response(response, v_key, v_scope);
        END IF;
        IF
            --@ row_security_in_use SCHEMA=
        THEN
            PERFORM idem__check_row_security();
        END IF;
        v_token := token;
        IF v_token IS NULL THEN
            /* _idem_record_token's common case here: the row written by this transaction itself */
            SELECT k.token, k.xmin INTO r FROM idempotency_keys k
             WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key;
            IF FOUND AND r.xmin OPERATOR(pg_catalog.=) pg_catalog.xid(pg_catalog.pg_current_xact_id_if_assigned()) THEN
                v_token := r.token;
            ELSE
                v_token := _idem_record_token('idem_complete', v_key, v_scope);
            END IF;
        END IF;
    END IF;
    /*
     * At most two passes.  The first: with the token given or found above,
     * or, with none, the row version this transaction wrote.  When that
     * matches nothing and no token was given or found, the checks passed
     * but no processing row version of the key is this transaction's own
     * (not a subtransaction's): _idem_record_token raises why, or gives the
     * token of the row this transaction wrote otherwise, for the second.
     */
    LOOP
        stamp := pg_catalog.clock_timestamp();
        UPDATE idempotency_keys AS k
           SET status = 'completed', response_code = idem_complete.response_code,
               response = idem_complete.response,
               --@ settle_times STAMP=stamp
         WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
           AND (k.token OPERATOR(pg_catalog.=) COALESCE(v_token, idem_complete.token)
                OR (v_token IS NULL AND idem_complete.token IS NULL
                    AND k.xmin OPERATOR(pg_catalog.=) pg_catalog.xid(pg_catalog.pg_current_xact_id_if_assigned())))
           AND k.status OPERATOR(pg_catalog.<>) 'completed' AND k.status OPERATOR(pg_catalog.<>) 'failed'
        RETURNING k.token INTO w_token;
        EXIT WHEN w_token IS NOT NULL OR v_token IS NOT NULL OR token IS NOT NULL;
        v_token := _idem_record_token('idem_complete', v_key, v_scope);
    END LOOP;
    IF w_token IS NULL THEN
        PERFORM _idem_record_no_match('idem_complete', v_key, v_scope, COALESCE(v_token, token));
    END IF;
    /* the UPDATE waited (another writer of the row): count from now */
    IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) stamp OPERATOR(pg_catalog.>) '10 ms'::interval THEN
        PERFORM idem__restamp(v_scope, ARRAY[v_key], ARRAY[w_token], stamp);
    END IF;
END
$idem_complete$;
COMMENT ON FUNCTION idem_complete(text, integer, jsonb, text, bigint) IS
    'Records the response of a processing claim (processing -> completed); duplicates replay it';

REVOKE ALL ON FUNCTION _idem_record_mine(xid) FROM PUBLIC;
REVOKE ALL ON FUNCTION _idem_record_no_match(text, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION _idem_record_token(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION _idem_record_check_response(jsonb, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _idem_record_mine(xid) TO idempotency_app;
GRANT EXECUTE ON FUNCTION _idem_record_no_match(text, text, text, bigint) TO idempotency_app;
GRANT EXECUTE ON FUNCTION _idem_record_token(text, text, text) TO idempotency_app;
GRANT EXECUTE ON FUNCTION _idem_record_check_response(jsonb, text, text) TO idempotency_app;
