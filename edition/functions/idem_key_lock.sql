/*
 * idem_key_lock(scope, key, mode): in the C build, the key's lock on the
 * Citus node that holds the key's shard, for the statement a claim routes
 * there; on a server without Citus it refuses (0A000), since a claim takes
 * its key's lock itself and, callable, it would let a tenant test and hold
 * another's key locks.  The SQL edition does not run on Citus: it always
 * refuses, as the C build does without Citus.
 */
CREATE FUNCTION idem_key_lock(scope text, key text, mode integer)
RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT
SET search_path FROM CURRENT
AS $idem_key_lock$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '0A000',
        MESSAGE = 'idem_key_lock() is only for claims on Citus',
        DETAIL = 'On a server without Citus a claim takes its key''s lock itself.';
END
$idem_key_lock$;
COMMENT ON FUNCTION idem_key_lock(text, text, integer) IS
    'The key lock of (scope, key) on this node: mode 0 waits, 1 tries, 2 tests (internal: claims route it to the key''s shard)';
