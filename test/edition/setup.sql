-- Install the SQL edition for the rest of the suite: its plain script into
-- this database's public schema (test/edition/regress.sh runs this instead
-- of sql/setup.sql, whose CREATE EXTENSION would need the C build).
\ir edition-install.psql
SELECT to_regclass('idempotency_keys') IS NOT NULL AS installed,
       (SELECT count(*) FROM pg_extension WHERE extname = 'idempotency') AS extensions;
-- Test helper: a copy of a key's row, to check that a failing call changed nothing.
CREATE FUNCTION row_of(k text, s text DEFAULT '') RETURNS text
LANGUAGE sql AS $$ SELECT row(r.*)::text FROM idem_lookup(k, s) r $$;
