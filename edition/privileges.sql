/*
 * The SQL edition's privileges, as the C build's: PUBLIC gets nothing;
 * idempotency_app may use the key functions and the table they use (the
 * functions run as their caller, so row level security applies to it);
 * idempotency_admin (a member of idempotency_app) settles keys, expires
 * and reads the counters.
 */
REVOKE ALL ON TABLE idempotency_keys FROM PUBLIC;
REVOKE ALL ON SEQUENCE idempotency_token_seq FROM PUBLIC;
REVOKE ALL ON TABLE idempotency_row_security FROM PUBLIC;
REVOKE ALL ON TABLE idempotency_stats FROM PUBLIC;
-- idem_execute's two overloads: edition/functions/idem_execute.sql (the edition cannot declare the C build's VARIADIC "any")
REVOKE ALL ON FUNCTION idem_checkpoint(text, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_checkpoint(text, text, text, bigint) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_claim_batch(text[], jsonb[], text, interval, interval, boolean, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_claim_batch(text[], jsonb[], text, interval, interval, boolean, integer) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_complete(text, integer, jsonb, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_complete(text, integer, jsonb, text, bigint) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_distribute(regclass, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_expire(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_expire(integer) TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_heartbeat(text, text, bigint, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_heartbeat(text, text, bigint, interval) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_key_lock(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_key_lock(text, text, integer) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_row_storable(jsonb, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_row_storable(jsonb, text, bytea) TO idempotency_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE idempotency_keys TO idempotency_app;
REVOKE ALL ON FUNCTION idem_lookup(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_lookup(text, text) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_record_batch(text[], integer[], jsonb[], text, bigint[], boolean[], boolean[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_record_batch(text[], integer[], jsonb[], text, bigint[], boolean[], boolean[]) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_release(text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_release(text, text, bigint) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_resolve(text, text, text, integer, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_resolve(text, text, text, integer, jsonb) TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_restore_row_security() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_row_security_restored() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_save_row_security() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats() TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_stats_databases() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats_databases() TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_stats_reset() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats_reset() TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_table_bytes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_table_bytes() TO idempotency_admin;
GRANT SELECT ON TABLE idempotency_row_security TO idempotency_app;
GRANT SELECT ON TABLE idempotency_stats TO idempotency_admin;
GRANT USAGE ON SEQUENCE idempotency_token_seq TO idempotency_app;

/*
 * The installing role's default privileges (ALTER DEFAULT PRIVILEGES) give
 * every object it creates to the roles they name: on Supabase, anon,
 * authenticated and service_role get ALL on each new table, sequence and
 * function in public, which would let anyone holding the project's public
 * API key read and delete keys.  No grant but the ones above can be meant
 * (the edition is installed whole, in one transaction): each other role's
 * is revoked from the edition's objects (its names, in the schema it goes
 * into) made in this transaction, in a subtransaction too (psql's
 * ON_ERROR_ROLLBACK: a younger id, age() below 0), as the C build's script
 * does on a new installation; PUBLIC's are as above.  Nothing else in the
 * schema is touched, whatever the transaction did to it before.
 */
DO $idem_default_privileges$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT o.kind, o.obj, a.grantee
          FROM (SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::pg_catalog.regclass::pg_catalog.text,
                       c.relowner, c.relacl
                  FROM pg_catalog.pg_class c
                 WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.current_schema()::pg_catalog.regnamespace
                   AND c.relname OPERATOR(pg_catalog.~) '^idempotency_'
                   AND pg_catalog.age(c.xmin) OPERATOR(pg_catalog.<=) 0
                UNION ALL
                SELECT 'ROUTINE', p.oid::pg_catalog.regprocedure::pg_catalog.text, p.proowner, p.proacl
                  FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace OPERATOR(pg_catalog.=) pg_catalog.current_schema()::pg_catalog.regnamespace
                   AND p.proname OPERATOR(pg_catalog.~) '^_?idem_'
                   AND pg_catalog.age(p.xmin) OPERATOR(pg_catalog.<=) 0
                UNION ALL
                SELECT 'TYPE', t.oid::pg_catalog.regtype::pg_catalog.text, t.typowner, t.typacl
                  FROM pg_catalog.pg_type t
                 WHERE t.typnamespace OPERATOR(pg_catalog.=) pg_catalog.current_schema()::pg_catalog.regnamespace
                   AND t.typname OPERATOR(pg_catalog.=) 'idempotency_status'
                   AND pg_catalog.age(t.xmin) OPERATOR(pg_catalog.<=) 0
               ) AS o(kind, obj, owner, acl)
          CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) AS a
         WHERE a.grantee OPERATOR(pg_catalog.<>) 0 AND a.grantee OPERATOR(pg_catalog.<>) o.owner
           AND a.grantee OPERATOR(pg_catalog.<>) ALL (ARRAY['idempotency_app'::pg_catalog.regrole,
                                                           'idempotency_admin'::pg_catalog.regrole]::pg_catalog.oid[])
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %I', r.kind, r.obj,
                                  pg_catalog.pg_get_userbyid(r.grantee));
    END LOOP;
END
$idem_default_privileges$;
