-- role_setting_stored (edition/build.sh expands "--@ role_setting_stored
-- NAME=.."): whether pg_db_role_setting may hold a value of setting NAME (a
-- literal: the lower-case name and its "=") that applies to this session:
-- one stored for this database or all, for the session user or all roles.
-- Only those rows' text is read, by the catalog's index: any role may
-- store long values for itself (ALTER ROLE ... SET search_path), which
-- every other session would otherwise read at each call.  (Aliases rs_*:
-- a PL/pgSQL variable of the same name would take the place of a short one.)
EXISTS (SELECT FROM pg_catalog.pg_db_role_setting rs_s
         WHERE rs_s.setdatabase OPERATOR(pg_catalog.=) ANY (ARRAY[0::pg_catalog.oid,
                   (SELECT rs_d.oid FROM pg_catalog.pg_database rs_d
                     WHERE rs_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())])
           AND rs_s.setrole OPERATOR(pg_catalog.=) ANY (ARRAY[0::pg_catalog.oid,
                   (SELECT rs_r.oid FROM pg_catalog.pg_roles rs_r
                     WHERE rs_r.rolname OPERATOR(pg_catalog.=) pg_catalog.session_user())])
           AND pg_catalog.strpos(pg_catalog.lower(rs_s.setconfig::pg_catalog.text), %NAME%) OPERATOR(pg_catalog.>) 0)
