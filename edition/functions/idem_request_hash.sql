/*
 * idem_request_hash(jsonb | bytea | text): the request hash, bit for bit the
 * C build's (src/hash.c).  A JSON request is hashed in a canonical form:
 *	- compact JSON text, no white space;
 *	- object keys in jsonb's own order (jsonb_each's), duplicate keys already
 *	  resolved by jsonb;
 *	- strings escaped as jsonb prints them;
 *	- numbers in numeric_normalize() form (1.0, 1.00 and 1e0 are all "1")
 *	  when their first digit stands for 10^-32 to 10^32; further out, in
 *	  scientific form: the digits without trailing zeros, the first before
 *	  a point, then "e" and the exponent (1e131000, -2.5e-40);
 * and the hash is SHA-256 of that text in the database encoding.  The bytea
 * and text variants hash the bytes as given.
 *
 * The canonical text is made one of three ways, the same text each way:
 *	- the common case, every number plain (zero, or 10^-32 <= |n| < 10^33)
 *	  with a display scale of at most 63, so that jsonb's own text is short
 *	  (about 100 characters a number at most): jsonb's text made compact by
 *	  json_strip_nulls (null members stood in for), trailing zeros dropped
 *	  from fractions when no string holds a point;
 *	- numbers plain, but a string holds a point (or the stand-in for null
 *	  members): one regexp pass over jsonb's text (slower: PostgreSQL's
 *	  regexps report submatches slowly);
 *	- a number not plain: idem_hash_canonical walks the document, printing
 *	  no number in full: 1e131000 is 131,001 characters as jsonb prints it,
 *	  and 0e-16383 16,385, for a few bytes stored (idem_hash_number).
 * Which way is chosen from the numbers' values and scale() (jsonpath sees
 * no display scale), without printing any of them.
 *
 * Differences from the C build: the jsonpath that finds the numbers
 * recurses (the C build's iterator does not), so a document nested deeper
 * than about 10,000 levels (at max_stack_depth 2MB; jsonb's parser takes
 * about 14,000) raises 54001 stack depth limit exceeded; and the walk
 * copies each container it enters (SQL has no other way into one), so a
 * deeply nested document with a number out of the plain range would cost
 * time in the product of its size and depth (8,000 levels around a string
 * of 400 kB: 17 s): the walk stops, 54000, once it would copy more than 64
 * times the document's size and 256 MB (a document nested at most 32 deep
 * never comes near: each level is copied once); and a document over 16 MB
 * as jsonb is refused, 54000, and one that the walk takes over 4 MB: the
 * ways hold arrays of its items, 100 bytes an item and more (past 2^24
 * items, jsonpath fails: XX000; past 2^28 characters, regexp_replace).
 */

/*
 * The canonical text of a JSON number: see idem_request_hash.  Time and
 * memory in proportion to its stored digits: the exponent comes from
 * to_char's scientific form (exact: from the stored weight, before any
 * rounding of the significand), and the significand by exact
 * multiplications by powers of ten.
 */
CREATE FUNCTION idem_hash_number(n numeric)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path FROM CURRENT
AS $idem_hash_number$
DECLARE
    a numeric := pg_catalog.abs(n);
    e integer;
    k integer;
    s integer;
    t text;
BEGIN
    IF a OPERATOR(pg_catalog.=) 0 THEN
        RETURN '0';                 -- -0 and 0.000 too
    END IF;
    IF a OPERATOR(pg_catalog.>=) 1e-32 AND a OPERATOR(pg_catalog.<) 1e33 THEN
        RETURN pg_catalog.trim_scale(n)::text; -- numeric_normalize's form
    END IF;
    /* the exponent of the first significant digit */
    e := pg_catalog.split_part(pg_catalog.to_char(a, '9EEEE'), 'e', 2)::integer;
    a := pg_catalog.trim_scale(a);
    IF e OPERATOR(pg_catalog.<) 0 THEN
        /* times 10^-e (at most 10^16383): exact, no scale added */
        t := pg_catalog.trim_scale(a OPERATOR(pg_catalog.*) ('1e' OPERATOR(pg_catalog.||) (OPERATOR(pg_catalog.-) e)::text)::numeric)::text;
    ELSE
        /*
         * times 10^-e, in steps that keep the exact product within
         * numeric's 16383 fraction digits (a product's scale is capped
         * there, and rounded); when no step fits, a's digits span at least
         * 16383 fraction digits plus its integer part, all stored, so
         * printing it costs in proportion to what is stored.
         */
        k := e;
        LOOP
            EXIT WHEN k OPERATOR(pg_catalog.=) 0;
            s := LEAST(k, 16383 OPERATOR(pg_catalog.-) pg_catalog.scale(a));
            EXIT WHEN s OPERATOR(pg_catalog.<=) 0;
            a := pg_catalog.trim_scale(a OPERATOR(pg_catalog.*) ('1e-' OPERATOR(pg_catalog.||) s::text)::numeric);
            k := k OPERATOR(pg_catalog.-) s;
        END LOOP;
        t := a::text;
        IF k OPERATOR(pg_catalog.>) 0 THEN
            t := pg_catalog.replace(t, '.', '');
            t := pg_catalog.left(t, 1) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.substr(t, 2);
        END IF;
    END IF;
    RETURN CASE WHEN n OPERATOR(pg_catalog.<) 0 THEN '-' ELSE '' END OPERATOR(pg_catalog.||) t OPERATOR(pg_catalog.||) 'e' OPERATOR(pg_catalog.||) e::text;
END
$idem_hash_number$;
COMMENT ON FUNCTION idem_hash_number(numeric) IS
    'Internal to idem_request_hash(jsonb): the canonical text of a JSON number';

/*
 * The canonical text of a JSON document (see idem_request_hash): a walk
 * with a stack of its own (no recursion, so any depth jsonpath takes),
 * writing each number by idem_hash_number.  A container near the top whose
 * numbers are all plain is written at once: jsonb's text of it, compacted
 * by one regexp pass (strings kept as they are, the separators' spaces and
 * the fractions' trailing zeros dropped); deeper ones are walked through,
 * so a deep document is not searched again at every level.
 */
CREATE FUNCTION idem_hash_canonical(request jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path FROM CURRENT
AS $idem_hash_canonical$
DECLARE
    vals jsonb[] := ARRAY[request];     -- the stack: a value to write,
    lits text[] := ARRAY[NULL::text];   -- or else a text to write
    depths integer[] := ARRAY[0];
    top integer := 1;
    out text[] := '{}';
    n integer := 0;
    v jsonb;
    lit text;
    depth integer;
    keys text[];
    items jsonb[];
    copied bigint := 0;
    budget constant bigint := 64 OPERATOR(pg_catalog.*) pg_catalog.pg_column_size(vals[1])::bigint OPERATOR(pg_catalog.+) 268435456;   -- (its size uncompressed)
    kind text;
BEGIN
    --@ check_document_size DOC=request MAX=4194304
    WHILE top OPERATOR(pg_catalog.>) 0 LOOP
        v := vals[top];
        lit := lits[top];
        depth := depths[top];
        top := top OPERATOR(pg_catalog.-) 1;
        n := n OPERATOR(pg_catalog.+) 1;
        IF lit IS NOT NULL THEN
            out[n] := lit;
            CONTINUE;
        END IF;
        kind := pg_catalog.jsonb_typeof(v);
        IF kind OPERATOR(pg_catalog.=) 'number' THEN
            out[n] := idem_hash_number(v::numeric);
        ELSIF kind OPERATOR(pg_catalog.=) 'object' OR kind OPERATOR(pg_catalog.=) 'array' THEN
            IF depth OPERATOR(pg_catalog.<) 32
               AND NOT EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(pg_catalog.jsonb_path_query_array(v, 'strict $.** ? (@.type() == "number")')) AS t(j),
                                           LATERAL (SELECT j::numeric) AS x(x)
                               WHERE pg_catalog.scale(x) OPERATOR(pg_catalog.>) 63
                                  OR (x OPERATOR(pg_catalog.<>) 0::numeric
                                      AND (pg_catalog.abs(x) OPERATOR(pg_catalog.<) 1e-32
                                           OR pg_catalog.abs(x) OPERATOR(pg_catalog.>=) 1e33))) THEN
                out[n] := pg_catalog.regexp_replace(v::text,
                                         E'("(?:[^"\\\\]|\\\\.)*")|([,:]) |(\\.[0-9]*[1-9])0+(?![0-9])|\\.0+(?![0-9])',
                                         E'\\1\\2\\3', 'g');
                CONTINUE;
            END IF;
            /* its members are copied out of it: the walk's cost */
            copied := copied OPERATOR(pg_catalog.+) pg_catalog.pg_column_size(v);
            IF copied OPERATOR(pg_catalog.>) budget THEN
                RAISE EXCEPTION USING ERRCODE = '54000',
                    MESSAGE = 'request is nested too deeply to hash in the SQL edition',
                    DETAIL = pg_catalog.format('Its canonical form would copy more than %s bytes (64 times its %s bytes, and 256 MB): it holds a number outside 10^-32..10^33 under levels that each hold much of it.',
                                    budget, pg_catalog.pg_column_size(vals[1])),
                    HINT = 'Send the request less deeply nested; the C build hashes it.';
            END IF;
            IF kind OPERATOR(pg_catalog.=) 'object' THEN
                SELECT pg_catalog.array_agg(pg_catalog.to_jsonb(k)::text ORDER BY o), pg_catalog.array_agg(j ORDER BY o) INTO keys, items
                FROM pg_catalog.jsonb_each(v) WITH ORDINALITY AS t(k, j, o);
                out[n] := '{';
                top := top OPERATOR(pg_catalog.+) 1;
                vals[top] := NULL; lits[top] := '}'; depths[top] := depth;
                FOR i IN REVERSE COALESCE(pg_catalog.array_length(items, 1), 0) .. 1 LOOP
                    top := top OPERATOR(pg_catalog.+) 1;
                    vals[top] := items[i]; lits[top] := NULL; depths[top] := depth OPERATOR(pg_catalog.+) 1;
                    top := top OPERATOR(pg_catalog.+) 1;
                    vals[top] := NULL;
                    lits[top] := CASE WHEN i OPERATOR(pg_catalog.>) 1 THEN ',' ELSE '' END
                                 OPERATOR(pg_catalog.||) keys[i] OPERATOR(pg_catalog.||) ':';
                    depths[top] := depth;
                END LOOP;
            ELSE
                SELECT pg_catalog.array_agg(j ORDER BY o) INTO items
                FROM pg_catalog.jsonb_array_elements(v) WITH ORDINALITY AS t(j, o);
                out[n] := '[';
                top := top OPERATOR(pg_catalog.+) 1;
                vals[top] := NULL; lits[top] := ']'; depths[top] := depth;
                FOR i IN REVERSE COALESCE(pg_catalog.array_length(items, 1), 0) .. 1 LOOP
                    top := top OPERATOR(pg_catalog.+) 1;
                    vals[top] := items[i]; lits[top] := NULL; depths[top] := depth OPERATOR(pg_catalog.+) 1;
                    IF i OPERATOR(pg_catalog.>) 1 THEN
                        top := top OPERATOR(pg_catalog.+) 1;
                        vals[top] := NULL; lits[top] := ','; depths[top] := depth;
                    END IF;
                END LOOP;
            END IF;
        ELSE
            out[n] := v::text;      -- string, true, false, null
        END IF;
    END LOOP;
    RETURN pg_catalog.array_to_string(out, '');
END
$idem_hash_canonical$;
COMMENT ON FUNCTION idem_hash_canonical(jsonb) IS
    'Internal to idem_request_hash(jsonb): the canonical text of a JSON document';

CREATE FUNCTION idem_request_hash(request jsonb)
RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path FROM CURRENT
AS $idem_request_hash$
DECLARE
    numbers jsonb;
    h bytea;
    x numeric;
    points integer;
    zeros text[];                   -- the first five of them
    nzeros integer;
    form text;
    doc text;
    canonical text;
    plain boolean;
    trimmed text;
BEGIN
    /* the commonest request: see the fragment */
    h :=
        --@ request_hash_fast DOC=request
        ;
    IF h IS NOT NULL THEN
        RETURN h;
    END IF;
    --@ check_document_size DOC=request MAX=16777216
    numbers := pg_catalog.jsonb_path_query_array(request, 'strict $.** ? (@.type() == "number")');
    /*
     * Then the common case, in as few statements as can be (each costs
     * about as much as hashing a short request): every number plain, with
     * no trailing zeros and a display scale of at most 63, and no string
     * holding the stand-in for null members below.  Anything else is
     * looked at again below.
     */
    FOR i IN 0 .. pg_catalog.jsonb_array_length(numbers) OPERATOR(pg_catalog.-) 1 LOOP
        x := (numbers OPERATOR(pg_catalog.->) i)::numeric;
        IF pg_catalog.scale(x) OPERATOR(pg_catalog.<>) pg_catalog.min_scale(x)
           OR pg_catalog.scale(x) OPERATOR(pg_catalog.>) 63
           OR (x OPERATOR(pg_catalog.<>) 0::numeric
               AND (pg_catalog.abs(x) OPERATOR(pg_catalog.<) 1e-32 OR pg_catalog.abs(x) OPERATOR(pg_catalog.>=) 1e33)) THEN
            plain := false;
            EXIT;
        END IF;
    END LOOP;
    IF plain IS NULL THEN
        doc := request::text;
        IF pg_catalog.strpos(doc, '-0.0E-0') OPERATOR(pg_catalog.=) 0 THEN
            RETURN pg_catalog.sha256(pg_catalog.convert_to(
                pg_catalog.replace(pg_catalog.json_strip_nulls(pg_catalog.replace(doc, '": null', '": -0.0E-0')::json)::text,
                                   '-0.0E-0', 'null'),
                pg_catalog.getdatabaseencoding()));
        END IF;
    END IF;
    /*
     * The common case: every number plain (10^-32 <= |x| < 10^33, or 0)
     * with a display scale of at most 63, so that its jsonb text is short;
     * those with trailing zeros are noted.  (A number's display scale
     * shows only in SQL: scale(); a loop over the numbers costs less than
     * a query over them.)
     */
    points := 0;
    zeros := '{}';
    nzeros := 0;
    FOR i IN 0 .. pg_catalog.jsonb_array_length(numbers) OPERATOR(pg_catalog.-) 1 LOOP
        x := (numbers OPERATOR(pg_catalog.->) i)::numeric;
        IF pg_catalog.scale(x) OPERATOR(pg_catalog.>) 63
           OR (x OPERATOR(pg_catalog.<>) 0::numeric
               AND (pg_catalog.abs(x) OPERATOR(pg_catalog.<) 1e-32 OR pg_catalog.abs(x) OPERATOR(pg_catalog.>=) 1e33)) THEN
            RETURN pg_catalog.sha256(pg_catalog.convert_to(idem_hash_canonical(request), pg_catalog.getdatabaseencoding()));
        END IF;
        IF pg_catalog.scale(x) OPERATOR(pg_catalog.>) 0 THEN
            points := points OPERATOR(pg_catalog.+) 1;
            IF pg_catalog.scale(x) OPERATOR(pg_catalog.<>) pg_catalog.min_scale(x) THEN
                nzeros := nzeros OPERATOR(pg_catalog.+) 1;
                IF nzeros OPERATOR(pg_catalog.<=) 5 THEN
                    zeros[nzeros] := x::text;
                END IF;
            END IF;
        END IF;
    END LOOP;
    doc := request::text;
    /*
     * Then json_strip_nulls writes jsonb's text compact, re-escaping strings
     * as jsonb does; it drops object members that are null, so those are
     * made a number first that jsonb's text cannot hold outside a string
     * (one with an exponent), and made null again after.  Inside strings
     * the same text is replaced both ways, so it comes back as it was.
     * Trailing zeros are dropped from the numbers noted, when no string
     * holds a point (every point in the text is a number's, so no string is
     * touched): for a few, by their text followed by what can follow a
     * number (a suffix of another number is its trailing zeros too);
     * for more, by a regexp pass over the points.
     */
    IF pg_catalog.strpos(doc, '-0.0E-0') OPERATOR(pg_catalog.=) 0
       AND (nzeros OPERATOR(pg_catalog.=) 0
            OR pg_catalog.length(doc) OPERATOR(pg_catalog.-) pg_catalog.length(pg_catalog.replace(doc, '.', ''))
               OPERATOR(pg_catalog.=) points) THEN
        canonical := pg_catalog.replace(pg_catalog.json_strip_nulls(pg_catalog.replace(doc, '": null', '": -0.0E-0')::json)::text,
                                        '-0.0E-0', 'null');
        IF nzeros OPERATOR(pg_catalog.>) 4 THEN
            canonical := pg_catalog.regexp_replace(canonical, E'(\\.[0-9]*[1-9])0+(?![0-9])|\\.0+(?![0-9])', E'\\1', 'g');
        ELSE
            FOREACH form IN ARRAY zeros LOOP
                trimmed := pg_catalog.trim_scale(form::numeric)::text;
                canonical := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(canonical,
                                 form OPERATOR(pg_catalog.||) ',', trimmed OPERATOR(pg_catalog.||) ','),
                                 form OPERATOR(pg_catalog.||) ']', trimmed OPERATOR(pg_catalog.||) ']'),
                                 form OPERATOR(pg_catalog.||) '}', trimmed OPERATOR(pg_catalog.||) '}');
                IF canonical OPERATOR(pg_catalog.=) form THEN
                    canonical := trimmed;
                END IF;
            END LOOP;
        END IF;
        RETURN pg_catalog.sha256(pg_catalog.convert_to(canonical, pg_catalog.getdatabaseencoding()));
    END IF;
    /*
     * Every number plain, but a string holds a point or the stand-in: one
     * regexp pass over jsonb's text, strings kept as they are, the
     * separators' spaces and the fractions' trailing zeros dropped.
     */
    RETURN pg_catalog.sha256(pg_catalog.convert_to(
        pg_catalog.regexp_replace(doc, E'("(?:[^"\\\\]|\\\\.)*")|([,:]) |(\\.[0-9]*[1-9])0+(?![0-9])|\\.0+(?![0-9])',
                                  E'\\1\\2\\3', 'g'),
        pg_catalog.getdatabaseencoding()));
END
$idem_request_hash$;
COMMENT ON FUNCTION idem_request_hash(jsonb) IS
    'SHA-256 of the canonical form of a JSON request: equal documents hash equal whatever their key order or spacing';

CREATE FUNCTION idem_request_hash(request bytea)
RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path FROM CURRENT
AS $idem_request_hash$
BEGIN
    RETURN pg_catalog.sha256(request);
END
$idem_request_hash$;
COMMENT ON FUNCTION idem_request_hash(bytea) IS
    'SHA-256 of the request bytes as given';

CREATE FUNCTION idem_request_hash(request text)
RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path FROM CURRENT
AS $idem_request_hash$
BEGIN
    RETURN pg_catalog.sha256(pg_catalog.convert_to(request, pg_catalog.getdatabaseencoding()));   -- its bytes as stored
END
$idem_request_hash$;
COMMENT ON FUNCTION idem_request_hash(text) IS
    'SHA-256 of the request text as given (its bytes in the database encoding)';
