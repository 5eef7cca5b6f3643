-- test/edition/compare/catalog.sql: the objects an edition made in schema
-- :s, one line each, "kind|object|facts", in a form that does not depend on
-- the schema's name (search_path is :s, so its own names print unqualified;
-- the schema's name is replaced by "@" where text holds it), nor on oids or
-- order of creation.  test/edition/compare.sh runs it once for the C build
-- (public) and once for the edition (ed) in one database, sorts and diffs.
-- Roles are cluster-wide: roles.sql prints them.
SET search_path = :s, pg_catalog;
\pset format unaligned
\pset tuples_only on
\pset footer off
CREATE TEMP VIEW nsp AS SELECT oid FROM pg_namespace WHERE nspname = :'s';
-- replaces the schema's name (qualified names in expressions, settings)
CREATE TEMP TABLE sch (name text);
INSERT INTO sch VALUES (:'s');
CREATE FUNCTION pg_temp.n(t text) RETURNS text LANGUAGE sql STABLE
  AS $$ SELECT replace(replace(t, quote_ident((SELECT name FROM sch)) || '.', '@.'), (SELECT name FROM sch) || '.', '@.') $$;
CREATE FUNCTION pg_temp.acl(a aclitem[]) RETURNS text LANGUAGE sql STABLE
  AS $$ SELECT coalesce(string_agg(g || ':' || p || CASE WHEN gr THEN '*' ELSE '' END, ',' ORDER BY g, p), '-')
          FROM (SELECT CASE WHEN e.grantee = 0 THEN 'PUBLIC'
                            WHEN r.rolname = current_user THEN '(owner)' ELSE r.rolname END AS g,
                       e.privilege_type AS p, e.is_grantable AS gr
                  FROM aclexplode(a) e LEFT JOIN pg_roles r ON r.oid = e.grantee) x $$;

-- functions and procedures
SELECT 'proc|' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')|'
       || concat_ws('|', 'kind=' || p.prokind::text, 'args=' || pg_temp.n(pg_get_function_arguments(p.oid)),
          'result=' || coalesce(pg_temp.n(pg_get_function_result(p.oid)), '-'),
          'volatile=' || p.provolatile::text, 'strict=' || p.proisstrict, 'parallel=' || p.proparallel::text,
          'secdef=' || p.prosecdef, 'leakproof=' || p.proleakproof,
          'config=' || coalesce((SELECT string_agg(split_part(c, '=', 1), ',' ORDER BY c) FROM unnest(p.proconfig) c
                                  WHERE c NOT LIKE 'search\_path=%' AND c NOT LIKE 'plan\_cache\_mode=%'), '-'),
          'rows=' || p.prorows, 'variadic=' || format_type(p.provariadic, NULL),
          'support=' || p.prosupport::text)
  FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM nsp);
-- how it is made: its language, cost and settings' values (the schema's name as @)
SELECT 'impl|' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')|lang=' || l.lanname
       || '|cost=' || p.procost || '|config=' || coalesce(regexp_replace(array_to_string(p.proconfig, ','), '\m' || :'s' || '\M', '@', 'g'), '-')
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = (SELECT oid FROM nsp);
SELECT 'proc-acl|' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')|' || pg_temp.acl(coalesce(p.proacl, acldefault('f'::"char", p.proowner)))
  FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM nsp);
SELECT 'comment|function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')|' || d.description
  FROM pg_proc p JOIN pg_description d ON d.objoid = p.oid AND d.classoid = 'pg_proc'::regclass
 WHERE p.pronamespace = (SELECT oid FROM nsp);

-- types (not the row types of relations, not arrays)
SELECT 'type|' || format_type(t.oid, NULL) || '|' || concat_ws('|', 'typtype=' || t.typtype::text,
         'labels=' || (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid),
         'attrs=' || (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ',' ORDER BY a.attnum)
                       FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
         'base=' || CASE WHEN t.typtype = 'd' THEN format_type(t.typbasetype, t.typtypmod) END,
         'notnull=' || CASE WHEN t.typtype = 'd' THEN t.typnotnull::text END,
         'acl=' || pg_temp.acl(coalesce(t.typacl, acldefault('T'::"char", t.typowner))))
  FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid
 WHERE t.typnamespace = (SELECT oid FROM nsp) AND (c.oid IS NULL OR c.relkind = 'c')
   AND NOT (t.typcategory = 'A' AND t.typelem <> 0 AND t.typlen = -1);
SELECT 'comment|type ' || format_type(t.oid, NULL) || '|' || d.description
  FROM pg_type t JOIN pg_description d ON d.objoid = t.oid AND d.classoid = 'pg_type'::regclass
 WHERE t.typnamespace = (SELECT oid FROM nsp);

-- relations: tables, sequences, views, indexes
SELECT 'rel|' || c.relname || '|' || concat_ws('|', 'kind=' || c.relkind::text, 'persistence=' || c.relpersistence::text,
         'options=' || coalesce(array_to_string(c.reloptions, ','), '-'), 'rls=' || c.relrowsecurity,
         'forcerls=' || c.relforcerowsecurity, 'replident=' || c.relreplident::text,
         'acl=' || pg_temp.acl(coalesce(c.relacl, acldefault((CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END)::"char", c.relowner))))
  FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM nsp) AND c.relkind <> 'c';
SELECT 'column|' || c.relname || '.' || a.attname || '|' || concat_ws('|', 'num=' || a.attnum,
         'type=' || format_type(a.atttypid, a.atttypmod), 'notnull=' || a.attnotnull,
         'default=' || coalesce(pg_temp.n(pg_get_expr(ad.adbin, ad.adrelid)), '-'),
         'identity=' || a.attidentity::text, 'generated=' || a.attgenerated::text,
         'collation=' || coalesce((SELECT collname FROM pg_collation WHERE oid = a.attcollation), '-'),
         'storage=' || a.attstorage::text, 'compression=' || a.attcompression::text, 'stats=' || a.attstattarget,
         'acl=' || coalesce(pg_temp.acl(a.attacl), '-'))
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
 WHERE c.relnamespace = (SELECT oid FROM nsp) AND c.relkind IN ('r', 'p', 'v', 'm', 'f');
SELECT 'constraint|' || c.relname || '.' || k.conname || '|' || k.contype::text || '|' || pg_temp.n(pg_get_constraintdef(k.oid))
       || '|deferrable=' || k.condeferrable || '|deferred=' || k.condeferred || '|valid=' || k.convalidated
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid WHERE c.relnamespace = (SELECT oid FROM nsp);
SELECT 'index|' || i.relname || '|' || pg_temp.n(pg_get_indexdef(i.oid)) || '|unique=' || x.indisunique
       || '|primary=' || x.indisprimary || '|replident=' || x.indisreplident
  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE i.relnamespace = (SELECT oid FROM nsp);
SELECT 'trigger|' || c.relname || '.' || t.tgname || '|' || pg_temp.n(pg_get_triggerdef(t.oid)) || '|enabled=' || t.tgenabled::text
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = (SELECT oid FROM nsp) AND NOT t.tgisinternal;
SELECT 'policy|' || c.relname || '.' || p.polname || '|' || p.polcmd::text || '|' || p.polpermissive
       || '|' || coalesce(pg_temp.n(pg_get_expr(p.polqual, p.polrelid)), '-') || '|' || coalesce(pg_temp.n(pg_get_expr(p.polwithcheck, p.polrelid)), '-')
  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid WHERE c.relnamespace = (SELECT oid FROM nsp);
SELECT 'sequence|' || c.relname || '|' || concat_ws('|', format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement,
         s.seqmax, s.seqmin, s.seqcache, s.seqcycle,
         'owned=' || coalesce((SELECT t.relname || '.' || a.attname FROM pg_depend d JOIN pg_class t ON t.oid = d.refobjid
                                 JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                                WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')
                                  AND d.refclassid = 'pg_class'::regclass), '-'))
  FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relnamespace = (SELECT oid FROM nsp);
SELECT 'view|' || c.relname || '|' || pg_temp.n(regexp_replace(pg_get_viewdef(c.oid), '\s+', ' ', 'g'))
  FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM nsp) AND c.relkind IN ('v', 'm');
SELECT 'comment|relation ' || c.relname || coalesce('.' || a.attname, '') || '|' || d.description
  FROM pg_class c JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass
  LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = d.objsubid AND d.objsubid > 0
 WHERE c.relnamespace = (SELECT oid FROM nsp);
SELECT 'comment|constraint ' || k.conname || '|' || d.description
  FROM pg_constraint k JOIN pg_description d ON d.objoid = k.oid AND d.classoid = 'pg_constraint'::regclass
  JOIN pg_class c ON c.oid = k.conrelid WHERE c.relnamespace = (SELECT oid FROM nsp);
SELECT 'comment|trigger ' || t.tgname || '|' || d.description
  FROM pg_trigger t JOIN pg_description d ON d.objoid = t.oid AND d.classoid = 'pg_trigger'::regclass
  JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = (SELECT oid FROM nsp);
-- objects of other kinds in the schema: named, so that a new kind shows
SELECT 'other|' || pg_describe_object(d.classid, d.objid, 0)
  FROM (SELECT 'pg_operator'::regclass AS classid, oid AS objid FROM pg_operator WHERE oprnamespace = (SELECT oid FROM nsp)
        UNION ALL SELECT 'pg_collation'::regclass, oid FROM pg_collation WHERE collnamespace = (SELECT oid FROM nsp)
        UNION ALL SELECT 'pg_conversion'::regclass, oid FROM pg_conversion WHERE connamespace = (SELECT oid FROM nsp)
        UNION ALL SELECT 'pg_opclass'::regclass, oid FROM pg_opclass WHERE opcnamespace = (SELECT oid FROM nsp)
        UNION ALL SELECT 'pg_statistic_ext'::regclass, oid FROM pg_statistic_ext WHERE stxnamespace = (SELECT oid FROM nsp)
        UNION ALL SELECT 'pg_ts_config'::regclass, oid FROM pg_ts_config WHERE cfgnamespace = (SELECT oid FROM nsp)) d;
-- the rows of its tables that are configuration, not keys
SELECT 'rows|' || c.relname || '|' || (xpath('/row/count/text()', query_to_xml(format('SELECT count(*) FROM %I.%I', :'s', c.relname), false, true, '')))[1]::text
  FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM nsp) AND c.relkind = 'r';
