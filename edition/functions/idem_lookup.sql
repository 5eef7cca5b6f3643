/*
 * idem_lookup(key, scope): the key's row, or no row (src/record.c): the
 * key and scope checked as every key function checks them; read as the
 * caller, so row level security applies.
 */
CREATE FUNCTION idem_lookup(key text, scope text DEFAULT '')
RETURNS SETOF idempotency_keys
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED ROWS 1
SET search_path FROM CURRENT
AS $idem_lookup$
BEGIN
    PERFORM idem__check_key(key, scope);
    PERFORM idem__check_row_security();
    RETURN QUERY SELECT k.* FROM idempotency_keys k
                  WHERE k.scope OPERATOR(pg_catalog.=) idem_lookup.scope
                    AND k.key OPERATOR(pg_catalog.=) idem_lookup.key;
END
$idem_lookup$;
COMMENT ON FUNCTION idem_lookup(text, text) IS 'The row of a key, or no row';
