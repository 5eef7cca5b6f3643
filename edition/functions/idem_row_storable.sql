/*
 * idem_row_storable(response, recovery_point, request_hash): the CHECK of
 * idempotency_keys, as the C build's (src/input.c): false for a response
 * whose text form would be longer than 256 MB (pg_dump writes each row in
 * one piece of at most 1 GB), a recovery point longer than 1 MB, a request
 * hash that is not 32 bytes.  A response of at most 8188 bytes as given,
 * not compressed, is short enough surely (8192 less the 4 bytes of header
 * that a value stored out of line leaves out of its size; a compressed
 * one, as a value read from a table can be, is counted: its size says
 * little of its text's; the C build reads its size uncompressed).  Above, it counts as
 * the C build does (src/input.c, ResponseTooLong): 2 for each key, scalar
 * and container's start and end, and each scalar's and key's text at most
 * (a string's escapes, a number's digits, 5 for a boolean, 4 for null),
 * never printing the response whole (a number of 10 bytes can print
 * 131,072 digits; 0e-16383, 16,385).  Its numbers' lengths first, without
 * printing them (N; over 256 MB: false).  The rest is at most 6 times its
 * size uncompressed (S: a byte of a string counts 6 at most, "\u0001"; each
 * key, element and container takes a 4-byte header or entry, and counts 9
 * at most besides its strings and numbers): 6 S + N <= 256 MB, true.  Else
 * the count itself, by jsonpath (each key by .keyvalue(), which copies its
 * value: at most 16 times S).  A response over 8192 bytes uncompressed
 * that holds an item below 16 levels of containers is refused, first, as
 * the C build refuses it (IDEM_MAX_RESPONSE_DEPTH): so both builds take
 * the same rows, and a dump of either restores into the other (one row
 * the CHECK refused fails the COPY of the whole table), and so is one
 * over 64 MB uncompressed (IDEM_MAX_RESPONSE_BYTES): the walk holds
 * arrays of its items, which jsonpath builds of at most 2^24 (XX000
 * past), and such a response has fewer (each item takes a 4-byte entry).
 *
 * It keeps its SET clause, though the CHECK calls it for every write of a
 * key (a call with a SET clause costs more than its work): without it, it
 * would run under each writer's search_path, and PostgreSQL plans a
 * PL/pgSQL function's expressions again whenever the path differs from the
 * one they were planned under (idem_execute writes under pg_catalog,
 * pg_temp, the others under the edition's own): 30,000 instructions fewer
 * per explicit request, 275,000 more per idem_execute (docs/performance.md).
 */
CREATE FUNCTION idem_row_storable(response jsonb, recovery_point text, request_hash bytea)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $idem_row_storable$
BEGIN
    /* the common row in one expression: a hash of 32 bytes or none, a short recovery point, a short response */
    IF (request_hash IS NULL OR pg_catalog.octet_length(request_hash) OPERATOR(pg_catalog.=) 32)
       AND (recovery_point IS NULL
            OR pg_catalog.octet_length(recovery_point) OPERATOR(pg_catalog.<=) 1048576)
       AND (response IS NULL OR (pg_catalog.pg_column_size(response) OPERATOR(pg_catalog.<=) 8188
                                 AND pg_catalog.pg_column_compression(response) IS NULL)) THEN
        RETURN true;
    END IF;
    DECLARE
        max_text constant bigint := 268435456;
        whole jsonb := response;
        size bigint;
        numbers bigint := 0;
        containers bigint;
        scalars bigint;
        tokens bigint;
        counted bigint;
        booleans bigint;
        nulls bigint;
        strings record;
        n numeric;
        a numeric;
        lo integer;
        hi integer;
        mid integer;
    BEGIN
        IF request_hash IS NOT NULL AND pg_catalog.octet_length(request_hash) OPERATOR(pg_catalog.<>) 32 THEN
            RETURN false;
        END IF;
        IF recovery_point IS NOT NULL
           AND pg_catalog.octet_length(recovery_point) OPERATOR(pg_catalog.>) 1048576 THEN
            RETURN false;
        END IF;
        IF response IS NULL OR (pg_catalog.pg_column_size(response) OPERATOR(pg_catalog.<=) 8188
                                AND pg_catalog.pg_column_compression(response) IS NULL) THEN
            RETURN true;
        END IF;
        /*
         * its size uncompressed, as the C build reads it (the raw size, with
         * its header; a value stored out of line uncompressed reports its
         * size without): a copy (jsonb_path_query_first builds one, in
         * linear time)
         */
        whole := pg_catalog.jsonb_path_query_first(whole, '$');
        size := pg_catalog.pg_column_size(whole);
        IF size OPERATOR(pg_catalog.<=) 8192 THEN
            RETURN true;
        END IF;
        IF size OPERATOR(pg_catalog.>) 67108864 THEN
            RETURN false;
        END IF;
        /* an item at level 17: refused (the walk below stops there) */
        IF pg_catalog.jsonb_path_exists(whole, 'strict $.**{17}') THEN
            RETURN false;
        END IF;
        /*
         * The counts below hold arrays of the response's items (numbers,
         * types, strings, keys), 100 to 250 bytes an item in a backend's
         * memory.
         */
        /* numeric_out's length: a sign, the digits before the point (0: one), the point and the scale's digits */
        FOR n IN SELECT v::numeric FROM pg_catalog.jsonb_array_elements(pg_catalog.jsonb_path_query_array(whole, 'strict $.** ? (@.type() == "number")')) v LOOP
            a := pg_catalog.abs(n);
            IF a OPERATOR(pg_catalog.<) 1e15 THEN
                numbers := numbers OPERATOR(pg_catalog.+) pg_catalog.length(pg_catalog.trunc(a)::pg_catalog.text);
            ELSE
                /* digits before the point: the d with 10^(d-1) <= a < 10^d */
                /* numeric has at most 131072 digits before the point: 1e131072 overflows */
                lo := 16;
                hi := 131072;
                WHILE lo OPERATOR(pg_catalog.<) hi LOOP
                    mid := (lo OPERATOR(pg_catalog.+) hi) OPERATOR(pg_catalog./) 2;
                    IF a OPERATOR(pg_catalog.<) ('1e' OPERATOR(pg_catalog.||) mid::pg_catalog.text)::numeric THEN
                        hi := mid;
                    ELSE
                        lo := mid OPERATOR(pg_catalog.+) 1;
                    END IF;
                END LOOP;
                numbers := numbers OPERATOR(pg_catalog.+) lo;
            END IF;
            numbers := numbers OPERATOR(pg_catalog.+) CASE WHEN n OPERATOR(pg_catalog.<) 0 THEN 1 ELSE 0 END
                       OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.scale(n) OPERATOR(pg_catalog.>) 0
                                                   THEN 1 OPERATOR(pg_catalog.+) pg_catalog.scale(n) ELSE 0 END;
            IF numbers OPERATOR(pg_catalog.>) max_text THEN
                RETURN false;
            END IF;
        END LOOP;
        IF ((6 OPERATOR(pg_catalog.*) size) OPERATOR(pg_catalog.+) numbers) OPERATOR(pg_catalog.<=) max_text THEN
            RETURN true;
        END IF;
        BEGIN
            /* the count: items by type, then the strings' and keys' escaped lengths */
            SELECT COALESCE(pg_catalog.sum(c.n) FILTER (WHERE c.t OPERATOR(pg_catalog.=) ANY ('{object,array}')), 0),
                   COALESCE(pg_catalog.sum(c.n) FILTER (WHERE c.t OPERATOR(pg_catalog.<>) ALL ('{object,array}')), 0),
                   COALESCE(pg_catalog.sum(c.n) FILTER (WHERE c.t OPERATOR(pg_catalog.=) 'boolean'), 0),
                   COALESCE(pg_catalog.sum(c.n) FILTER (WHERE c.t OPERATOR(pg_catalog.=) 'null'), 0)
              INTO containers, scalars, booleans, nulls
              FROM (SELECT v OPERATOR(pg_catalog.#>>) '{}' AS t, pg_catalog.count(*) AS n
                      FROM pg_catalog.jsonb_array_elements(pg_catalog.jsonb_path_query_array(whole, 'strict $.**.type()')) v
                     GROUP BY 1) AS c;
            /*
             * each string and key as jsonb prints it: its quotes, its bytes,
             * \" and \\, \uXXXX for a control character but \b \f \n \r \t,
             * which the C build counts 6 as the others (4 more each); one
             * pass of the text's own escaping and five replace()s, not a
             * translate() of 31 characters (about 20 times slower)
             */
            SELECT COALESCE(pg_catalog.sum(pg_catalog.octet_length(t.j::pg_catalog.text)), 0) AS printed,
                   COALESCE(pg_catalog.sum(pg_catalog.octet_length(t.s) OPERATOR(pg_catalog.*) 5
                                           OPERATOR(pg_catalog.-) pg_catalog.octet_length(pg_catalog.replace(t.s, E'\b', ''))
                                           OPERATOR(pg_catalog.-) pg_catalog.octet_length(pg_catalog.replace(t.s, E'\f', ''))
                                           OPERATOR(pg_catalog.-) pg_catalog.octet_length(pg_catalog.replace(t.s, E'\n', ''))
                                           OPERATOR(pg_catalog.-) pg_catalog.octet_length(pg_catalog.replace(t.s, E'\r', ''))
                                           OPERATOR(pg_catalog.-) pg_catalog.octet_length(pg_catalog.replace(t.s, E'\t', ''))), 0) AS short_escapes,
                   pg_catalog.count(*) FILTER (WHERE t.key) AS keys
              INTO strings
              FROM (SELECT v AS j, v OPERATOR(pg_catalog.#>>) '{}' AS s, false AS key
                      FROM pg_catalog.jsonb_array_elements(pg_catalog.jsonb_path_query_array(whole, 'strict $.** ? (@.type() == "string")')) v
                    UNION ALL
                    SELECT v, v OPERATOR(pg_catalog.#>>) '{}', true
                      FROM pg_catalog.jsonb_array_elements(pg_catalog.jsonb_path_query_array(whole, 'strict $.** ? (@.type() == "object").keyvalue().key')) v) AS t;
            /* 2 a token: each container's start and end, each key, each scalar (a scalar response: in an array) */
            tokens := (2 OPERATOR(pg_catalog.*) containers) OPERATOR(pg_catalog.+) strings.keys;
            tokens := (tokens OPERATOR(pg_catalog.+) scalars)
                      OPERATOR(pg_catalog.+) CASE WHEN containers OPERATOR(pg_catalog.=) 0 THEN 2 ELSE 0 END;
            counted := 2 OPERATOR(pg_catalog.*) tokens;
            /* strings and keys: quotes, bytes, 2 for " and \, 6 for a control character */
            counted := (counted OPERATOR(pg_catalog.+) strings.printed) OPERATOR(pg_catalog.+) (4 OPERATOR(pg_catalog.*) strings.short_escapes);
            /* numbers, booleans (5 at most), nulls */
            counted := (counted OPERATOR(pg_catalog.+) numbers) OPERATOR(pg_catalog.+) (5 OPERATOR(pg_catalog.*) booleans);
            counted := counted OPERATOR(pg_catalog.+) (4 OPERATOR(pg_catalog.*) nulls);
            RETURN counted OPERATOR(pg_catalog.<=) max_text;
        END;
    END;
END
$idem_row_storable$;
COMMENT ON FUNCTION idem_row_storable(jsonb, text, bytea) IS
    'idempotency_keys'' CHECK: a response and recovery point short enough for pg_dump, a request hash of 32 bytes';
