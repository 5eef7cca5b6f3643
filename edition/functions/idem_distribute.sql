/*
 * idem_distribute: the C build's Citus set-up (distribute idempotency_keys
 * by scope, delegate the key functions).  The SQL edition does not support
 * Citus: its functions are PL/pgSQL statements on the table, which Citus
 * would route but not guard as the C build does (the key's shard held
 * where it is while a call uses it, the key lock taken on the shard's node,
 * the fencing tokens unique per node).  It refuses, whatever its
 * arguments, and changes nothing.
 */
CREATE FUNCTION idem_distribute(colocate_with regclass DEFAULT NULL, delegate boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_distribute$
BEGIN
    RAISE EXCEPTION 'the SQL edition of idempotency does not support Citus'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'idem_distribute() is available in the C build only.',
              HINT = 'On Citus, install the C build of the extension (CREATE EXTENSION idempotency from the compiled package) and call idem_distribute() on the coordinator.';
END
$idem_distribute$;
COMMENT ON FUNCTION idem_distribute(regclass, boolean) IS
    'Citus: not supported by the SQL edition, which refuses (0A000); the C build distributes idempotency_keys by scope and delegates the key functions';
