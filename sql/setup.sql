-- Install the extension for the rest of the suite.
CREATE EXTENSION idempotency;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
-- Test helper: a copy of a key's row, to check that a failing call changed nothing.
CREATE FUNCTION row_of(k text, s text DEFAULT '') RETURNS text
LANGUAGE sql AS $$ SELECT row(r.*)::text FROM idem_lookup(k, s) r $$;
