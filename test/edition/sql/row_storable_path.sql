-- The SQL edition only: idem_row_storable, the CHECK of idempotency_keys,
-- called directly and through the CHECK under a hostile search_path, in a
-- session of its own: nothing on that path runs, and the answers are the
-- C build's (a response compressed in a table, short stored but long as
-- text, is counted, not taken by its stored size).
\set VERBOSITY terse
\c
CREATE SCHEMA hostile;
CREATE TABLE hostile.calls (what text);
CREATE FUNCTION hostile.seen(what text) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES (what); SELECT true $$;
CREATE DOMAIN hostile.text AS pg_catalog.text CHECK (hostile.seen('text'));
CREATE FUNCTION hostile.num_lt(numeric, numeric) RETURNS boolean LANGUAGE sql AS
$$ SELECT hostile.seen('numeric <') AND false $$;
CREATE OPERATOR hostile.< (LEFTARG = numeric, RIGHTARG = numeric, FUNCTION = hostile.num_lt);
CREATE FUNCTION hostile.int8_gt(bigint, bigint) RETURNS boolean LANGUAGE sql AS
$$ SELECT hostile.seen('bigint >') AND false $$;
CREATE OPERATOR hostile.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = hostile.int8_gt);
CREATE FUNCTION hostile.int8_pl(bigint, bigint) RETURNS bigint LANGUAGE sql AS
$$ SELECT CASE WHEN hostile.seen('bigint +') THEN 0::bigint END $$;
CREATE OPERATOR hostile.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = hostile.int8_pl);
CREATE FUNCTION hostile.text_cat(pg_catalog.text, pg_catalog.text) RETURNS pg_catalog.text LANGUAGE sql AS
$$ SELECT CASE WHEN hostile.seen('text ||') THEN '1e0' END $$;
CREATE OPERATOR hostile.|| (LEFTARG = pg_catalog.text, RIGHTARG = pg_catalog.text, FUNCTION = hostile.text_cat);
CREATE FUNCTION hostile.length(pg_catalog.text) RETURNS integer LANGUAGE sql AS
$$ SELECT CASE WHEN hostile.seen('length') THEN 0 END $$;
CREATE FUNCTION hostile.abs(numeric) RETURNS numeric LANGUAGE sql AS
$$ SELECT CASE WHEN hostile.seen('abs') THEN 0::numeric END $$;
CREATE FUNCTION hostile.octet_length(pg_catalog.text) RETURNS integer LANGUAGE sql AS
$$ SELECT CASE WHEN hostile.seen('octet_length') THEN 0 END $$;
-- the values, made before the path is set: a response of more than 8192
-- bytes (its numbers counted, one of 10^20), one too long as text (3,000
-- numbers of 131,001 digits), a long recovery point, a short hash
CREATE TEMP TABLE v (n int, response jsonb, recovery_point text, request_hash bytea);
INSERT INTO v VALUES (1, jsonb_build_object('big', repeat('x', 9000), 'n', 1e20, 'm', 12.5), NULL, NULL),
    (2, ('[' || repeat('1e131000,', 3000) || '0]')::jsonb, NULL, NULL),
    (3, NULL, repeat('r', 1048577), NULL),
    (4, NULL, NULL, '\x00'),
    (5, '{"a": 1}', 'step 1', sha256('x'));
SELECT n, pg_column_compression(response) IS NOT NULL AS compressed FROM v WHERE n = 2;
SET search_path = hostile, pg_catalog, public;
SELECT n, public.idem_row_storable(response, recovery_point, request_hash) AS storable FROM pg_temp.v ORDER BY n;
SET search_path = '';
SELECT n, public.idem_row_storable(response, recovery_point, request_hash) AS storable FROM pg_temp.v ORDER BY n;
RESET search_path;
-- and through the CHECK, by a write under the hostile path
SET search_path = hostile, pg_catalog, public;
BEGIN;
INSERT INTO public.idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response)
SELECT 'row_storable_path', 'k', 'completed', 1, now(), now(), now(), response FROM pg_temp.v WHERE n = 1;
SELECT count(*) AS written FROM public.idempotency_keys WHERE scope = 'row_storable_path';
ROLLBACK;
RESET search_path;
SELECT count(*) AS hostile_calls FROM hostile.calls;
DROP SCHEMA hostile CASCADE;
-- a response short stored whose numbers print long (0e-16383: ten bytes,
-- 16,385 characters) is judged without printing it, as the C build judges
-- it: 16,000 of them print as 262 MB: storable; 16,400, 268.7 MB: not;
-- 16,380, 268,419,060 characters, the C build's count 268,419,064, within
-- 256 MB (268,435,456): storable, counted by type (its numbers' lengths,
-- the rest within 6 times its size of the limit).  The same nested 17 deep:
-- not storable, in both builds (an item below 16 levels of containers, in
-- a response over 8 kB: sql/response_dump_size.sql).
SELECT k, depth, pg_column_size(r) < 250000 AS short_stored, idem_row_storable(r, NULL, NULL) AS storable
  FROM (VALUES (16000, 0), (16400, 0), (16380, 0), (16380, 17)) AS t(k, depth),
       LATERAL (WITH RECURSIVE d(i, r) AS (
                    SELECT 0, jsonb_agg('0e-16383'::jsonb) FROM generate_series(1, k)
                    UNION ALL SELECT i + 1, jsonb_build_array(r) FROM d WHERE i < depth)
                SELECT r FROM d WHERE i = depth) AS s
 ORDER BY depth, k;
-- and by type, keys and strings too: a response at the limit, one byte
-- over, its key holding a control character that jsonb prints as \u0001
-- or as \t or \n (the C build counts 6 each; the edition takes jsonb's
-- text of its strings and adds 4 for each of \b \f \n \r \t): the C
-- build's answers
SELECT c, n, idem_row_storable(r, NULL, NULL) AS storable
  FROM (VALUES (1), (9), (10)) AS u(c), (VALUES (0), (1)) AS t(n),
       LATERAL (SELECT jsonb_build_object('k"\' || chr(c), jsonb_agg('1e131071'::jsonb), 'pad', repeat('x', 126921 + n), 't', true, 'f', null) AS r
                  FROM generate_series(1, 2047)) AS s
 ORDER BY c, n;
