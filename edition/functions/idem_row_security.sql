/*
 * The row level security policies of idempotency_keys, kept in
 * idempotency_row_security for pg_dump (as the C build's 0.4.0): saved by
 * idem_save_row_security(), put back by idem_restore_row_security(), which
 * the trigger idempotency_row_security_restored runs when a restore writes
 * the recorded rows.  The plain script makes no extension, so the table is
 * found by name, in the schema these functions were created in (their
 * search_path, SET FROM CURRENT), not through pg_extension.
 */

/*
 * Put the policies recorded in idempotency_row_security on idempotency_keys:
 * ENABLE and FORCE ROW LEVEL SECURITY, and each policy of that name the
 * table lacks.  Returns the policies created.  Policies the table has are
 * left as they are.  All or none: if one cannot be made (a role it names
 * is missing, say), none is, with a WARNING for each, so that the table
 * is left with row level security on and the policies it had (none, after
 * a restore), which shows tenants nothing, rather than with part of them;
 * the key functions then refuse with IK006 until every recorded policy is
 * in place.  The table's owner (or a superuser) runs it.
 */
CREATE FUNCTION idem_restore_row_security()
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
SET standard_conforming_strings = on
AS $idem_restore_row_security$
DECLARE
    keys regclass := 'idempotency_keys'::regclass;
    saved regclass := 'idempotency_row_security'::regclass;
    any_saved boolean;
    p record;
    made integer := 0;
    failed name;
    err text;
BEGIN
    /*
     * The recorded expressions are parsed as the C build parses them, with
     * only pg_catalog on the path (they were written so): the names above
     * were looked up first, and are written schema-qualified from here on.
     * The function's SET clause puts the path back when it returns.
     */
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    EXECUTE format('SELECT EXISTS (SELECT FROM %s)', saved) INTO any_saved;
    IF NOT any_saved THEN
        RETURN 0;
    END IF;
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', keys);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', keys);
    BEGIN
        FOR p IN EXECUTE format('SELECT * FROM %s ORDER BY policy', saved) LOOP
            CONTINUE WHEN EXISTS (SELECT FROM pg_policy WHERE polrelid OPERATOR(pg_catalog.=) keys
                                                          AND polname OPERATOR(pg_catalog.=) p.policy);
            failed := p.policy;
            EXECUTE format('CREATE POLICY %I ON %s AS %s FOR %s TO %s%s%s', p.policy, keys,
                           CASE WHEN p.permissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END, p.command,
                           (SELECT string_agg(CASE WHEN r OPERATOR(pg_catalog.=) 'public' THEN 'PUBLIC'
                                                   ELSE quote_ident(r) END, ', ')
                              FROM unnest(p.roles) AS r),
                           CASE WHEN p.using_expr IS NOT NULL THEN ' USING (' || p.using_expr || ')' ELSE '' END,
                           CASE WHEN p.check_expr IS NOT NULL THEN ' WITH CHECK (' || p.check_expr || ')' ELSE '' END);
            made := made + 1;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS err = MESSAGE_TEXT;
        RAISE WARNING 'could not put policy "%" back on idempotency_keys: %', failed, err
            USING HINT = 'No recorded policy was put back; the key functions refuse (IK006) until they all are. Mend the cause, then run SELECT idem_restore_row_security().';
        RETURN 0;
    END;
    RETURN made;
END
$idem_restore_row_security$;
COMMENT ON FUNCTION idem_restore_row_security() IS
    'Puts the policies recorded in idempotency_row_security back on idempotency_keys (after a restore)';

/*
 * Record idempotency_keys' policies in idempotency_row_security, replacing
 * what it held; returns the policies recorded.  Run it after every change
 * of the policies, in the same transaction: the key functions refuse
 * (IK006) while they differ.
 */
CREATE FUNCTION idem_save_row_security()
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
SET quote_all_identifiers = off
SET standard_conforming_strings = on
SET DateStyle = 'ISO, MDY'
SET IntervalStyle = postgres
SET TimeZone = 'UTC'
SET extra_float_digits = 1
SET bytea_output = hex
SET lc_monetary = 'C'
AS $idem_save_row_security$
DECLARE
    keys regclass := 'idempotency_keys'::regclass;
    saved integer;
BEGIN
    IF NOT (SELECT relrowsecurity FROM pg_class WHERE oid OPERATOR(pg_catalog.=) keys) THEN
        RAISE EXCEPTION 'row level security is not enabled on idempotency_keys'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Enable it and create the policies first (docs/security.md), then save them.';
    END IF;
    /*
     * idem__row_security_now: pg_get_expr writes the expressions with only
     * pg_catalog on the path, as the C build does, so every other name is
     * schema-qualified (a tenant function in the edition's own schema
     * too): either edition restores them; the key functions compare the
     * policies with the same function (idem__check_row_security).
     */
    DELETE FROM idempotency_row_security;
    INSERT INTO idempotency_row_security (policy, permissive, command, roles, using_expr, check_expr)
    SELECT * FROM idem__row_security_now(keys);
    GET DIAGNOSTICS saved = ROW_COUNT;
    RETURN saved;
END
$idem_save_row_security$;
COMMENT ON FUNCTION idem_save_row_security() IS
    'Records the row level security policies of idempotency_keys, so that pg_dump keeps them';

/*
 * A restore (pg_restore, psql with a plain dump) writes the recorded rows
 * with COPY, after the table and everything its policies name exist: put
 * the policies back then.  It runs as the role restoring, which owns the
 * edition's objects.
 */
CREATE FUNCTION idem_row_security_restored()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path FROM CURRENT
AS $idem_row_security_restored$
BEGIN
    PERFORM idem_restore_row_security();
    RETURN NULL;
END
$idem_row_security_restored$;
COMMENT ON FUNCTION idem_row_security_restored() IS
    'Trigger: a restore wrote idempotency_row_security, so its policies go back on idempotency_keys';
