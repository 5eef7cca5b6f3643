-- The SQL edition only: a role that may CREATE in the edition's own schema
-- (granted after the install, which refuses a schema PUBLIC may create in
-- and warns of any other role that may) puts operators and functions there whose
-- argument types match the edition's expressions more exactly than
-- pg_catalog's do (numeric = integer, text || integer: pg_catalog has
-- them only through a cast).  The edition's functions run with that schema
-- on their path; each of its names is pg_catalog's (test/edition/names.py
-- checks the source, this the running code): nothing planted runs, through
-- the request hash's every way (plain numbers, trailing zeros, numbers out
-- of range, nested ones), a claim, a replay and a completion.
\set VERBOSITY terse
\c
CREATE TABLE names_before AS
SELECT r, idem_request_hash(r) AS h
  FROM (VALUES ('{"amount": 12.50, "n": [1, 2.0, 3.10]}'::jsonb), ('{"a": 1e40, "b": [1e-40, {"c": 0.000}]}'),
               ('[1.10, 2.20, 3.30, 4.40, 5.50, 6.60, "x.y"]'), ('{"note": "-0.0E-0", "v": null, "w": 1.0}'),
               ((repeat('[', 33) || '1e35' || repeat(']', 33))::jsonb),
               (('{"big": "' || repeat('x', 9000) || '", "n": 2.50}')::jsonb)) AS t(r);
CREATE ROLE names_planter;
GRANT CREATE ON SCHEMA public TO names_planter;
CREATE TABLE names_calls (what text);
GRANT INSERT ON names_calls TO PUBLIC;
SET ROLE names_planter;
CREATE FUNCTION public.names_seen(what text) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO public.names_calls VALUES (what); SELECT true $$;
CREATE FUNCTION public.names_num_int(numeric, integer) RETURNS boolean LANGUAGE sql AS
$$ SELECT public.names_seen('numeric op integer') AND $1 <> $2::numeric $$;
CREATE OPERATOR public.<> (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.names_num_int);
CREATE OPERATOR public.= (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.names_num_int);
CREATE OPERATOR public.< (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.names_num_int);
CREATE FUNCTION public.names_int_num(integer, numeric) RETURNS boolean LANGUAGE sql AS
$$ SELECT public.names_seen('integer op numeric') AND $1::numeric <> $2 $$;
CREATE OPERATOR public.> (LEFTARG = integer, RIGHTARG = numeric, FUNCTION = public.names_int_num);
CREATE FUNCTION public.names_text_int(text, integer) RETURNS text LANGUAGE sql AS
$$ SELECT CASE WHEN public.names_seen('text || integer') THEN $1 || $2::text END $$;
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = integer, FUNCTION = public.names_text_int);
CREATE FUNCTION public.names_text_num(text, numeric) RETURNS text LANGUAGE sql AS
$$ SELECT CASE WHEN public.names_seen('text || numeric') THEN $1 || $2::text END $$;
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = numeric, FUNCTION = public.names_text_num);
CREATE FUNCTION public.names_num_text(numeric, text) RETURNS text LANGUAGE sql AS
$$ SELECT CASE WHEN public.names_seen('numeric || text') THEN $1::text || $2 END $$;
CREATE OPERATOR public.|| (LEFTARG = numeric, RIGHTARG = text, FUNCTION = public.names_num_text);
CREATE FUNCTION public.scale(integer) RETURNS integer LANGUAGE sql AS
$$ SELECT CASE WHEN public.names_seen('scale(integer)') THEN 0 END $$;
CREATE FUNCTION public.replace(text, text, character varying) RETURNS text LANGUAGE sql AS
$$ SELECT CASE WHEN public.names_seen('replace(text, text, varchar)') THEN $1 END $$;
RESET ROLE;
-- each way of the hash: its answer is the same as before the plants
SELECT pg_catalog.left(r::text, 40) AS request, idem_request_hash(r) = h AS same
  FROM (VALUES ('{"amount": 12.50, "n": [1, 2.0, 3.10]}'::jsonb), ('{"a": 1e40, "b": [1e-40, {"c": 0.000}]}'),
               ('[1.10, 2.20, 3.30, 4.40, 5.50, 6.60, "x.y"]'), ('{"note": "-0.0E-0", "v": null, "w": 1.0}'),
               ((repeat('[', 33) || '1e35' || repeat(']', 33))::jsonb),
               (('{"big": "' || repeat('x', 9000) || '", "n": 2.50}')::jsonb)) AS t(r),
       LATERAL (SELECT h FROM names_before WHERE names_before.r = t.r) AS b;
BEGIN;
SELECT outcome FROM idem_claim('names-1', '{"amount": 12.50, "big": 1e40}', 'names');
SELECT idem_complete('names-1', 201, '{"paid": 12.50}', 'names');
COMMIT;
SELECT outcome, response FROM idem_claim('names-1', '{"amount": 12.5, "big": 1E+40}', 'names');
SELECT outcome FROM idem_claim('names-1', '{"amount": 12.51, "big": 1e40}', 'names');
SELECT count(*) AS planted_calls FROM names_calls;
\c
DROP OWNED BY names_planter;
DROP ROLE names_planter;
DROP TABLE names_calls, names_before;
DELETE FROM idempotency_keys WHERE scope = 'names';
