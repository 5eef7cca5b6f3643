/*
 * The size of idempotency_keys with its indexes and TOAST: the table of
 * the schema this function was created in (found by name, as the plain
 * script makes no extension).  Where Citus has distributed it (which the
 * SQL edition does not support, idem_distribute), every shard's, as the C
 * build reads it.
 */
CREATE FUNCTION idem_table_bytes()
RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_table_bytes$
DECLARE
    keys regclass := 'idempotency_keys'::regclass;
    bytes bigint;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT pg_catalog.citus_total_relation_size(logicalrelid)'
                ' FROM pg_catalog.pg_dist_partition WHERE logicalrelid OPERATOR(pg_catalog.=) $1'
            INTO bytes USING keys;
        IF bytes IS NOT NULL THEN
            RETURN bytes;
        END IF;
    END IF;
    RETURN pg_catalog.pg_total_relation_size(keys);
END
$idem_table_bytes$;
COMMENT ON FUNCTION idem_table_bytes() IS
    'Size of idempotency_keys with its indexes: every shard on every node where Citus distributed it';
