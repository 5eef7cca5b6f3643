/*
 * idem_row_storable(response, recovery_point, request_hash): the CHECK of
 * idempotency_keys, as the C build's (src/input.c): false for a response
 * whose text form would be longer than 256 MB (pg_dump writes each row in
 * one piece of at most 1 GB), a recovery point longer than 1 MB, a request
 * hash that is not 32 bytes.  A response of at most 8192 bytes as given,
 * not compressed, is short enough surely (a compressed one, as a value
 * read from a table can be, is counted: its size says little of its
 * text's; the C build reads its size uncompressed).  Above, its numbers'
 * printed lengths are counted without printing them (a number of 10 bytes
 * can print 131,072 digits):
 * only when they fit is the text's length taken, which then costs at most
 * a few times the response's size.
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
       AND (response IS NULL OR (pg_catalog.pg_column_size(response) OPERATOR(pg_catalog.<=) 8192
                                 AND pg_catalog.pg_column_compression(response) IS NULL)) THEN
        RETURN true;
    END IF;
    DECLARE
        max_text constant bigint := 268435456;
        numbers bigint := 0;
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
        IF response IS NULL OR (pg_catalog.pg_column_size(response) OPERATOR(pg_catalog.<=) 8192
                                AND pg_catalog.pg_column_compression(response) IS NULL) THEN
            RETURN true;
        END IF;
        FOR n IN SELECT v::numeric FROM pg_catalog.jsonb_path_query(response, 'strict $.** ? (@.type() == "number")') v LOOP
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
            numbers := numbers OPERATOR(pg_catalog.+) pg_catalog.scale(n) OPERATOR(pg_catalog.+) 2;
            IF numbers OPERATOR(pg_catalog.>) max_text THEN
                RETURN false;
            END IF;
        END LOOP;
        RETURN pg_catalog.octet_length(response::pg_catalog.text) OPERATOR(pg_catalog.<=) max_text;
    END;
END
$idem_row_storable$;
COMMENT ON FUNCTION idem_row_storable(jsonb, text, bytea) IS
    'idempotency_keys'' CHECK: a response and recovery point short enough for pg_dump, a request hash of 32 bytes';
