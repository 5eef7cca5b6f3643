/*
 * idem_release(key, scope, token): the holder gives a processing claim up
 * (deletes its row), so the next claim is new.  It writes no time: one
 * guarded DELETE, as the C build's (idem_complete.sql: the token).
 */
CREATE FUNCTION idem_release(
    key text,
    scope text DEFAULT '',
    token bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_release$
DECLARE
    v_key constant text := key;
    v_scope constant text := scope;
    v_token bigint;
BEGIN
    PERFORM idem__check_key(v_key, v_scope);
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_release() in a read-only transaction';
    END IF;
    PERFORM idem__check_row_security();
    v_token := COALESCE(token, _idem_record_token('idem_release', v_key, v_scope));
    DELETE FROM idempotency_keys AS k
     WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
       AND k.token OPERATOR(pg_catalog.=) v_token
       AND k.status OPERATOR(pg_catalog.<>) 'completed' AND k.status OPERATOR(pg_catalog.<>) 'failed';
    IF NOT FOUND THEN
        PERFORM _idem_record_no_match('idem_release', v_key, v_scope, v_token);
    END IF;
END
$idem_release$;
COMMENT ON FUNCTION idem_release(text, text, bigint) IS
    'Gives up a processing claim (deletes it) so the next claim starts afresh; holder only';
