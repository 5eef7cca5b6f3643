-- The SQL edition's idem_request_hash against the C build's, byte for byte.
-- Runs where the C build is CREATE EXTENSIONed in public and the edition's
-- functions are in schema ed.  Prints counts and mismatches only (expected:
-- 0 mismatches), so its output does not depend on the generated documents.
SET client_min_messages = warning;
SELECT setseed(0.36);

-- a JSON number, in one of many spellings
CREATE FUNCTION pg_temp.gen_number() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    k int := floor(random() * 10);
    sign text := CASE WHEN random() < 0.3 THEN '-' ELSE '' END;
    ip text;
    fp text;
    e int;
BEGIN
    CASE k
    WHEN 0 THEN         -- integers
        RETURN sign || floor(random() * power(10, floor(random() * 19)))::bigint;
    WHEN 1 THEN         -- decimals, trailing zeros
        RETURN sign || floor(random() * 100000)::bigint || '.' || lpad(floor(random() * 1000)::text, 3, '0')
               || repeat('0', floor(random() * 5)::int);
    WHEN 2 THEN         -- the boundaries, zeros, numeric's limits
        RETURN (ARRAY['0', '-0', '0.0', '-0.0', '0.000', '0e5', '0e-100', '0e-16383', '-0e-16383', '0E+0',
                      '1e32', '1e33', '9.99e32', '9.999999999999999999999999999999999e32', '1e-32', '1e-33',
                      '0.99999e-32', '1.0e-32', '10e-33', '0.1e-31', '-1e33', '-9.99e32', '-1e-32', '-1e-33',
                      '100000000000000000000000000000000', '999999999999999999999999999999999',
                      '1000000000000000000000000000000000', '0.00000000000000000000000000000001',
                      '0.000000000000000000000000000000001', '0.000000000000000000000000000000015',
                      '1e131071', '9.99999e131071', '-1e131071', '1e-16383', '-1e-16383', '1.5e-16382',
                      '1e131000', '1.0e-1000', '1E+2', '1.5E40', '-2.5e-40', '12345678901234567890123456789012345678',
                      '1.2345678901234567890123456789012345678e37', '10E130999', '1.000E-43', '0.001e-40',
                      '5.0000000000000000000000000000000000000000000000000000000000000000000000',
                      '1.00000000000000000000000000000000000000000000000000000000000000000000000000e-5',
                      '123.4560000000000000000000000000000000000000000000000000000000000000000e10',
                      '1e16384', '1e16383', '1.5e16390', '1e20000'])[1 + floor(random() * 53)];
    WHEN 3 THEN         -- mantissa and exponent, near the plain range's edges
        ip := floor(random() * 1000)::text;
        fp := CASE WHEN random() < 0.5 THEN '.' || floor(random() * 100000)::text || repeat('0', floor(random() * 3)::int) ELSE '' END;
        RETURN sign || ip || fp || (ARRAY['e', 'E', 'e+', 'E-', 'e-'])[1 + floor(random() * 5)] || floor(random() * 40)::int;
    WHEN 4 THEN         -- far out, both ways
        ip := (1 + floor(random() * 9))::text;
        fp := CASE WHEN random() < 0.6 THEN '.' || floor(random() * 1e9)::bigint::text ELSE '' END;
        e := CASE WHEN random() < 0.5 THEN 33 + floor(random() * 131000)::int ELSE -(33 + floor(random() * 16300)::int) END;
        RETURN sign || ip || fp || 'e' || e;
    WHEN 5 THEN         -- long mantissas, the point anywhere
        ip := (1 + floor(random() * 9))::text;
        FOR i IN 1 .. floor(random() * 120)::int LOOP
            ip := ip || floor(random() * 10)::text;
        END LOOP;
        IF random() < 0.3 THEN
            ip := ip || repeat('0', floor(random() * 40)::int);
        END IF;
        e := floor(random() * length(ip))::int;
        RETURN sign || left(ip, length(ip) - e) || CASE WHEN e > 0 THEN '.' || right(ip, e) ELSE '' END
               || CASE WHEN random() < 0.5 THEN 'e' || (floor(random() * 200)::int - 100) ELSE '' END;
    WHEN 6 THEN         -- small decimals, leading zeros
        RETURN sign || '0.' || repeat('0', floor(random() * 40)::int) || floor(random() * 100000)::text;
    WHEN 7 THEN         -- integers with trailing zeros, as exponents too
        RETURN sign || (1 + floor(random() * 99))::text || repeat('0', floor(random() * 45)::int)
               || CASE WHEN random() < 0.3 THEN '.000' ELSE '' END;
    ELSE                -- amounts
        RETURN sign || floor(random() * 100000)::text || '.' || lpad(floor(random() * 100)::text, 2, '0');
    END CASE;
END
$$;

-- a JSON string literal: escapes, unicode, text that looks like JSON
CREATE FUNCTION pg_temp.gen_string() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    pieces text[] := ARRAY['a', 'Z', 'key', ' ', ', ', ': ', '\": null', '-0.0E-0', '1.50', '2.0', '0.0',
                           '\"', '\\', '\/', '/', '\b', '\f', '\n', '\r', '\t', '\u0001', '\u001f', '\u001F',
                           '\u007f', '\u0020', '\u0041', '\u00e9', 'é', 'e' || chr(769), 'e\u0301', '中文',
                           '\u4e2d', chr(65535), '\uffff', chr(128512), '\ud83d\ude00', '\uD83D\uDE00',
                           chr(8232), '\u2028', '\\u0000', '\\n', '{', '}', '[', ']', ',', ':', 'null', 'true',
                           '1e400', chr(127), '\\\"', '\\\\', '   '];
    s text := '';
BEGIN
    FOR i IN 1 .. floor(random() * 7)::int LOOP
        s := s || pieces[1 + floor(random() * array_length(pieces, 1))];
    END LOOP;
    RETURN '"' || s || '"';
END
$$;

-- white space between tokens, or none
CREATE FUNCTION pg_temp.gen_space() RETURNS text LANGUAGE sql AS $$
    SELECT (ARRAY['', '', '', ' ', '  ', E'\n', E'\t', E' \r\n '])[1 + floor(random() * 8)]
$$;

-- a JSON value, nested up to depth levels
CREATE FUNCTION pg_temp.gen_value(depth int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r float8 := random();
    n int;
    keys text[] := ARRAY['"a"', '"b"', '"id"', '"amount"', '""', '"A"', '"aa"', '"é"', '"\u00e9"', '"😀"',
                         '"a\"b"', '"\\"', '"x, y"', '"k: v"', '"\n"', '"\u0001"', '"null"', '"1.50"'];
    parts text[] := '{}';
BEGIN
    IF depth > 0 AND r < 0.25 THEN
        n := floor(random() * 6);
        FOR i IN 1 .. n LOOP
            parts := parts || (pg_temp.gen_space() || CASE WHEN random() < 0.7 THEN keys[1 + floor(random() * array_length(keys, 1))]
                                                           ELSE pg_temp.gen_string() END
                               || pg_temp.gen_space() || ':' || pg_temp.gen_space() || pg_temp.gen_value(depth - 1));
        END LOOP;
        RETURN '{' || coalesce(array_to_string(parts, ','), '') || pg_temp.gen_space() || '}';
    ELSIF depth > 0 AND r < 0.45 THEN
        n := floor(random() * 6);
        FOR i IN 1 .. n LOOP
            parts := parts || (pg_temp.gen_space() || pg_temp.gen_value(depth - 1));
        END LOOP;
        RETURN '[' || coalesce(array_to_string(parts, ','), '') || pg_temp.gen_space() || ']';
    ELSIF r < 0.70 THEN
        RETURN pg_temp.gen_number();
    ELSIF r < 0.90 THEN
        RETURN pg_temp.gen_string();
    ELSE
        RETURN (ARRAY['null', 'true', 'false'])[1 + floor(random() * 3)];
    END IF;
END
$$;

CREATE TEMP TABLE corpus (id int PRIMARY KEY, src text, doc jsonb);
INSERT INTO corpus SELECT i, src, src::jsonb
FROM generate_series(1, 30000) AS i, LATERAL (SELECT pg_temp.gen_value(1 + i % 5)) AS g(src);

-- and documents made on the server: numbers of any display scale, deep nesting
INSERT INTO corpus
SELECT 100000 + row_number() OVER (), NULL, d
FROM (SELECT to_jsonb(round(0::numeric, 16383)) UNION ALL
      SELECT jsonb_build_object('z', round(1.5, 1000), 'y', round(0::numeric, 64), 'x', round(2::numeric, 63)) UNION ALL
      SELECT jsonb_build_array(round(1e32, 100), round(-1e-32, 16383), 1e33 - 1, -(1e33 - 1e-30)) UNION ALL
      SELECT to_jsonb(ARRAY[1e20000 + 1e16390, 1e20000 + 1e-10, 1e131000 + 1, 1e-16383 + 1e-16300]) UNION ALL
      SELECT ('1' || repeat('0', 130000) || '.' || repeat('0', 16382) || '1')::jsonb UNION ALL
      SELECT ('[' || repeat('1e131000,', 1000) || '0e-16383]')::jsonb UNION ALL
      SELECT (repeat('{"a": [', 500) || '1.50, 1e40, null' || repeat(']}', 500))::jsonb UNION ALL
      SELECT (repeat('[', 2000) || '{"x, y": null}' || repeat(']', 2000))::jsonb UNION ALL
      SELECT jsonb_build_object('k', NULL, 'n', jsonb_build_array(NULL, '": null', '-0.0E-0')) UNION ALL
      SELECT jsonb_build_object('a', '-0.0E-0', 'b', NULL) UNION ALL
      -- many fractions with trailing zeros, no point in any string
      SELECT (SELECT jsonb_agg(CASE WHEN k % 5 = 0 THEN to_jsonb(round(k::numeric, i % 4))
                                    WHEN k % 7 = 0 THEN jsonb_build_object('a', round((random() * 100)::numeric, 3), 'b', 'x, y: z')
                                    ELSE to_jsonb(round((random() * 1000)::numeric, 1 + k % 4)) END)
              FROM generate_series(1, 2 + i % 30) AS k)
      FROM generate_series(1, 2000) AS i UNION ALL
      -- strings holding a number's own text, and what may follow it
      SELECT jsonb_build_object('n', x, 's', x::text || d, 'a', jsonb_build_array(d || x::text || d, x, 'x' || x::text),
                                x::text || d, x, 'z', CASE WHEN i % 3 = 0 THEN NULL ELSE x END)
      FROM generate_series(1, 3000) AS i,
           LATERAL (SELECT round((random() * 1000)::numeric, 1 + i % 4) * (CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END)) AS r(x),
           LATERAL (SELECT (ARRAY[',', ']', '}', '', ', ', '": null', '.'])[1 + i % 7]) AS s(d) UNION ALL
      -- integers written without a display scale, to 10^40 and back (the
      -- edition hashes those below 10^33 without idem_request_hash's call,
      -- edition/fragments/request_hash_fast.sql), strings with points
      SELECT jsonb_build_object('n', x, 'a', jsonb_build_array(-x, x - 1, 'x.y', 1 - x), 'z', NULL, 's', x::text || '.0')
      FROM generate_series(0, 40) AS k, LATERAL (SELECT ('1' || repeat('0', k))::numeric) AS t(x) UNION ALL
      SELECT to_jsonb(x) FROM generate_series(1, 40) AS i, generate_series(-41, 40) AS e,
                              LATERAL (VALUES ((i * 1234567 + i % 7)::numeric * power(10::numeric, e)),
                                              (-(i * 7654321)::numeric * power(10::numeric, e))) AS v(x)) AS t(d);

-- what the corpus holds (numbers out of the plain range; null members, which
-- json_strip_nulls would drop; fractions with trailing zeros; requests with
-- numbers that the edition hashes without idem_request_hash's call)
SELECT count(*) AS documents,
       count(*) FILTER (WHERE jsonb_path_exists(doc, 'strict $.** ? (@.type() == "number" && @ != 0 && (@ >= 1e33 || @ <= -1e33 || (@ < 1e-32 && @ > -1e-32)))')) > 3000 AS many_far_numbers,
       count(*) FILTER (WHERE jsonb_path_exists(doc, 'strict $.** ? (@.type() == "object") ? (exists (@.* ? (@ == null)))')) > 1000 AS many_null_members,
       count(*) FILTER (WHERE src ~ '[0-9]\.[0-9]*0[],} \t\r\n]') > 3000 AS many_trailing_zeros,
       count(*) FILTER (WHERE jsonb_typeof(doc) IN ('object', 'array')) > 10000 AS many_containers,
       count(*) FILTER (WHERE pg_column_size(doc) <= 8192 AND pg_column_compression(doc) IS NULL
                              AND ROW(jsonb_path_query_array(doc, 'strict $.** ? (@.type() == "number")'))::record
                              *= ROW(jsonb_path_query_array(doc, 'strict $.** ? (@.type() == "number" && @.abs() < 1e33).floor()'))::record
                              AND strpos(doc::text, '-0.0E-0') = 0
                              AND jsonb_path_exists(doc, 'strict $.** ? (@.type() == "number")')) > 2000 AS many_hashed_without_the_call
FROM corpus;

-- jsonb: the same hash
SELECT count(*) FILTER (WHERE public.idem_request_hash(doc) IS DISTINCT FROM ed.idem_request_hash(doc)) AS jsonb_mismatches
FROM corpus;
SELECT id, left(doc::text, 300) AS doc
FROM corpus WHERE public.idem_request_hash(doc) IS DISTINCT FROM ed.idem_request_hash(doc)
ORDER BY id LIMIT 20;

-- text and bytea: the bytes as given
SELECT count(*) FILTER (WHERE public.idem_request_hash(src) IS DISTINCT FROM ed.idem_request_hash(src)) AS text_mismatches,
       count(*) FILTER (WHERE public.idem_request_hash(convert_to(src, 'UTF8'))
                              IS DISTINCT FROM ed.idem_request_hash(convert_to(src, 'UTF8'))) AS bytea_mismatches
FROM corpus WHERE src IS NOT NULL;
SELECT count(*) FILTER (WHERE public.idem_request_hash(t) IS DISTINCT FROM ed.idem_request_hash(t)) AS text_mismatches,
       count(*) FILTER (WHERE public.idem_request_hash(b) IS DISTINCT FROM ed.idem_request_hash(b)) AS bytea_mismatches
FROM (VALUES ('', ''::bytea), ('abc', '\x00ff'), (E'caf\u00e9 😀', '\x'), (repeat('x', 100000), decode(repeat('00', 1000), 'hex'))) AS v(t, b);

-- strict: NULL in, NULL out
SELECT ed.idem_request_hash(NULL::jsonb) IS NULL AS null_jsonb, ed.idem_request_hash(NULL::text) IS NULL AS null_text,
       ed.idem_request_hash(NULL::bytea) IS NULL AS null_bytea;

-- \u0000 is no jsonb text at all (neither build hashes it)
SELECT '"\u0000"'::jsonb;

-- the same labels, argument names and comments as the C functions
SELECT pg_get_function_identity_arguments(p.oid) AS args, p.provolatile, p.proisstrict, p.proparallel, p.prosecdef,
       p.provolatile = c.provolatile AND p.proisstrict = c.proisstrict AND p.proparallel = c.proparallel
       AND p.prosecdef = c.prosecdef AND p.prorettype = c.prorettype AND p.proargnames = c.proargnames
       AND obj_description(p.oid, 'pg_proc') = obj_description(c.oid, 'pg_proc') AS same_as_c
FROM pg_proc p JOIN pg_proc c ON c.proname = p.proname AND c.proargtypes = p.proargtypes
WHERE p.proname = 'idem_request_hash' AND p.pronamespace = 'ed'::regnamespace
  AND c.pronamespace = 'public'::regnamespace
ORDER BY 1;
