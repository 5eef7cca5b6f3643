/*
 * idem_heartbeat(key, scope, token, lease): extends the lease of a
 * processing claim the caller still holds to now + lease (idempotency.lease
 * when NULL); expires_at moves with it (the retention gap kept, in epoch
 * seconds as the C build computes it); due_at stays (at or before the old
 * lease end, so still at or before the new one: expiry moves it on).  Now
 * is taken before the guarded UPDATE and moved on after a wait, as in
 * idem_complete.sql (the restamp moves due_at too, as the C build's does).
 * Returns the new lease end.
 */
CREATE FUNCTION idem_heartbeat(
    key text,
    scope text DEFAULT '',
    token bigint DEFAULT NULL,
    lease interval DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_heartbeat$
DECLARE
    v_key constant text := key;
    v_scope constant text := scope;
    v_lease interval;
    v_token bigint;
    stamp timestamptz;
    lease_end timestamptz;
    until timestamptz;
BEGIN
    PERFORM idem__check_key(v_key, v_scope);
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_heartbeat() in a read-only transaction';
    END IF;
    v_lease := COALESCE(lease, idem__lease());
    PERFORM idem__check_interval(v_lease, 'lease', pg_catalog.clock_timestamp(), v_key, v_scope);
    PERFORM idem__check_row_security();
    v_token := COALESCE(token, _idem_record_token('idem_heartbeat', v_key, v_scope));
    stamp := pg_catalog.clock_timestamp();
    lease_end := stamp OPERATOR(pg_catalog.+) v_lease;
    UPDATE idempotency_keys AS k
       SET locked_until = lease_end,
           expires_at = pg_catalog.to_timestamp(pg_catalog.date_part('epoch', lease_end) OPERATOR(pg_catalog.+)
                            pg_catalog.date_part('epoch', k.expires_at OPERATOR(pg_catalog.-) k.locked_until)),
           updated_at = stamp
     WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key
       AND k.token OPERATOR(pg_catalog.=) v_token
       AND k.status OPERATOR(pg_catalog.<>) 'completed' AND k.status OPERATOR(pg_catalog.<>) 'failed'
    RETURNING k.locked_until INTO until;
    IF NOT FOUND THEN
        PERFORM _idem_record_no_match('idem_heartbeat', v_key, v_scope, v_token);
    END IF;
    /* the UPDATE waited (another writer of the row): count from now */
    IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) stamp OPERATOR(pg_catalog.>) '10 ms'::interval THEN
        IF idem__restamp(v_scope, ARRAY[v_key], ARRAY[v_token], stamp) THEN
            SELECT k.locked_until INTO until FROM idempotency_keys k
             WHERE k.scope OPERATOR(pg_catalog.=) v_scope AND k.key OPERATOR(pg_catalog.=) v_key;
        END IF;
    END IF;
    RETURN until;
END
$idem_heartbeat$;
COMMENT ON FUNCTION idem_heartbeat(text, text, bigint, interval) IS
    'Extends the lease of a processing claim the caller still holds; returns the new lease end';
