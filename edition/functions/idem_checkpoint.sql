/*
 * idem_checkpoint(key, recovery_point, scope, token): records how far a
 * multi-step request got (NULL clears it); a reclaimed claim returns it.
 * It writes no lease or expiry, only updated_at, taken before its
 * statement as the C build takes it: one guarded UPDATE (idem_complete.sql:
 * the token).
 */
CREATE FUNCTION idem_checkpoint(
    key text,
    recovery_point text,
    scope text DEFAULT '',
    token bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_checkpoint$
DECLARE
    v_key constant text := key;
    v_scope constant text := scope;
    v_token bigint;
BEGIN
    PERFORM idem__check_key(v_key, v_scope);
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_checkpoint() in a read-only transaction';
    END IF;
    /* the C build's IdemCheckRecoveryPoint: its bytes, over 1 MB */
    IF pg_catalog.octet_length(recovery_point) OPERATOR(pg_catalog.>) 1048576 THEN
        RAISE EXCEPTION USING ERRCODE = '54000',
            MESSAGE = 'recovery point is too large to store',
            DETAIL = pg_catalog.format('The recovery point for key "%s" in scope "%s" is longer than %s MB.', v_key, v_scope, 1),
            HINT = 'Store a reference to the state, or a digest of it, instead.';
    END IF;
    PERFORM idem__check_row_security();
    v_token := COALESCE(token, _idem_record_token('idem_checkpoint', v_key, v_scope));
    UPDATE idempotency_keys AS k
       SET recovery_point = idem_checkpoint.recovery_point, updated_at = pg_catalog.clock_timestamp()
     WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
       AND k.token OPERATOR(pg_catalog.=) v_token
       AND k.status OPERATOR(pg_catalog.<>) 'completed' AND k.status OPERATOR(pg_catalog.<>) 'failed';
    IF NOT FOUND THEN
        PERFORM _idem_record_no_match('idem_checkpoint', v_key, v_scope, v_token);
    END IF;
END
$idem_checkpoint$;
COMMENT ON FUNCTION idem_checkpoint(text, text, text, bigint) IS
    'Records how far a multi-step request got; a reclaimed claim returns it';
