-- check_document_size (edition/build.sh expands "--@ check_document_size DOC=.."):
-- refuses, 54000, a request DOC (jsonb) over 64 MB as jsonb, uncompressed
-- (a compressed one read from a table: its copy's size, jsonb_path_query_first
-- copying it whole in linear time).  The hash's ways build jsonb arrays of a
-- document's items (its numbers by jsonpath, a container's members), and
-- PostgreSQL builds no array of more than 2^24 items (the next doubling asks
-- for 1 GB: XX000); each item takes 4 bytes of the document at least, so one
-- of at most 2^26 bytes holds at most 2^24.
IF (CASE WHEN pg_catalog.pg_column_compression(%DOC%) IS NULL THEN pg_catalog.pg_column_size(%DOC%)
         ELSE pg_catalog.pg_column_size(pg_catalog.jsonb_path_query_first(%DOC%, '$')) END) OPERATOR(pg_catalog.>) 67108864 THEN
    RAISE EXCEPTION USING ERRCODE = '54000',
        MESSAGE = 'request is too large to hash in the SQL edition',
        DETAIL = pg_catalog.format('It is %s bytes as jsonb; the SQL edition hashes at most 64 MB (67108864 bytes).',
                        CASE WHEN pg_catalog.pg_column_compression(%DOC%) IS NULL THEN pg_catalog.pg_column_size(%DOC%)
                             ELSE pg_catalog.pg_column_size(pg_catalog.jsonb_path_query_first(%DOC%, '$')) END),
        HINT = 'Send a smaller request, or hash a digest of it; the C build hashes it.';
END IF;
