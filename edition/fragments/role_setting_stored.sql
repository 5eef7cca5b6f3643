-- role_setting_stored (edition/build.sh expands "--@ role_setting_stored
-- NAME=.."): whether pg_db_role_setting may hold a value of setting NAME (a
-- literal: the lower-case name and its "=") that applies to this session:
-- only the rows for all roles or the session user, in every database or
-- this one, are read.  Any role may store long values for itself (ALTER
-- ROLE ... SET search_path), and any role that may create a database for
-- its own (ALTER DATABASE ... SET), which every other session of the server
-- would otherwise read at each call (a row of 7 to 19 MB: every claim of
-- the server 0.2 to 0.45 s).  The CASE reads the text only after the row
-- matched (a WHERE orders its conditions by their cost), and the
-- database's oid (a scalar subquery, run at its first use) only for a row
-- of the session's roles that is not for every database.  (Alias rs_s: a
-- PL/pgSQL variable of the same name would take the place of a short
-- one.)
EXISTS (SELECT FROM pg_catalog.pg_db_role_setting rs_s
         WHERE CASE WHEN rs_s.setrole OPERATOR(pg_catalog.=) ANY (ARRAY[0::pg_catalog.oid,
                   pg_catalog.quote_ident(pg_catalog.session_user())::pg_catalog.regrole::pg_catalog.oid])
                 AND (rs_s.setdatabase OPERATOR(pg_catalog.=) 0::pg_catalog.oid
                      OR (pg_catalog.pg_identify_object_as_address('pg_catalog.pg_database'::pg_catalog.regclass,
                                                                    rs_s.setdatabase, 0)).object_names[1]
                         OPERATOR(pg_catalog.=) pg_catalog.current_database())
           THEN pg_catalog.strpos(pg_catalog.lower(rs_s.setconfig::pg_catalog.text), %NAME%) OPERATOR(pg_catalog.>) 0 END)