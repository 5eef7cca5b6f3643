-- role_setting_stored (edition/build.sh expands "--@ role_setting_stored
-- NAME=.."): whether pg_db_role_setting may hold a value of setting NAME (a
-- literal: the lower-case name and its "=") that applies to this session:
-- only rows for all roles or for the session user are read (a row of
-- another database's that names it too only sends the call the slower way,
-- which reads exactly the rows that apply).  Any role may store long values
-- for itself (ALTER ROLE ... SET search_path), which every other session
-- would otherwise read at each call (a row of 19 MB: every claim of the
-- server 0.2 s); reading the database's oid as well costs a replay 16,000
-- instructions more, for rows only a database's owner can store.
-- The CASE reads the text only after the role matched (a WHERE orders its
-- conditions by their cost).  (Alias rs_s: a PL/pgSQL variable of the same name would take the place
-- of a short one.)
EXISTS (SELECT FROM pg_catalog.pg_db_role_setting rs_s
         WHERE CASE WHEN rs_s.setrole OPERATOR(pg_catalog.=) ANY (ARRAY[0::pg_catalog.oid,
                   pg_catalog.quote_ident(pg_catalog.session_user())::pg_catalog.regrole::pg_catalog.oid])
           THEN pg_catalog.strpos(pg_catalog.lower(rs_s.setconfig::pg_catalog.text), %NAME%) OPERATOR(pg_catalog.>) 0 END)
