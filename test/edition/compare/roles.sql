-- test/edition/compare/roles.sql: the roles an edition made (idempotency_*),
-- their attributes, memberships and comments, one line each.
\pset format unaligned
\pset tuples_only on
SELECT 'role|' || r.rolname || '|' || concat_ws('|', 'super=' || r.rolsuper, 'inherit=' || r.rolinherit,
         'createrole=' || r.rolcreaterole, 'createdb=' || r.rolcreatedb, 'login=' || r.rolcanlogin,
         'replication=' || r.rolreplication, 'bypassrls=' || r.rolbypassrls, 'connlimit=' || r.rolconnlimit,
         'password=' || (r.rolpassword IS NOT NULL), 'validuntil=' || coalesce(r.rolvaliduntil::text, '-'),
         'config=' || coalesce((SELECT array_to_string(s.setconfig, ',') FROM pg_db_role_setting s
                                 WHERE s.setrole = r.oid AND s.setdatabase = 0), '-'))
  FROM pg_authid r WHERE r.rolname LIKE 'idempotency\_%';
SELECT 'member|' || g.rolname || '|' || m.rolname || '|admin=' || a.admin_option
  FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
 WHERE g.rolname LIKE 'idempotency\_%' OR m.rolname LIKE 'idempotency\_%';
SELECT 'comment|role ' || r.rolname || '|' || d.description
  FROM pg_roles r JOIN pg_shdescription d ON d.objoid = r.oid AND d.classoid = 'pg_authid'::regclass
 WHERE r.rolname LIKE 'idempotency\_%';
