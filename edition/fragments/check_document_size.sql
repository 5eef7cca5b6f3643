-- check_document_size (edition/build.sh expands "--@ check_document_size DOC=.. MAX=.."):
-- refuses, 54000, a request DOC (jsonb) over MAX bytes as jsonb, uncompressed
-- (one read from a table compressed, or stored out of line, whose size
-- pg_column_size gives without its 4-byte header: its copy's size,
-- jsonb_path_query_first copying it whole in linear time).  The hash's ways
-- hold arrays of the document's items (its numbers by jsonpath, a
-- container's members on the walk's stack), 100 bytes an item and more,
-- and an item for each 4 bytes of the document at worst: 16 MB
-- (idem_request_hash: 16 MB of zeros, 400 MB of a backend's memory; far
-- from jsonpath's 2^24 items, XX000 past them, and regexp's 2^28
-- characters); the walk, which holds more an item, 4 MB
-- (idem_hash_canonical: 4 MB of booleans behind 1e40, 390 MB and 5 s).
IF (CASE WHEN pg_catalog.pg_column_compression(%DOC%) IS NULL AND pg_catalog.pg_column_size(%DOC%) OPERATOR(pg_catalog.<=) (%MAX% OPERATOR(pg_catalog.-) 4)
         THEN pg_catalog.pg_column_size(%DOC%)
         ELSE pg_catalog.pg_column_size(pg_catalog.jsonb_path_query_first(%DOC%, '$')) END) OPERATOR(pg_catalog.>) %MAX% THEN
    RAISE EXCEPTION USING ERRCODE = '54000',
        MESSAGE = 'request is too large to hash in the SQL edition',
        DETAIL = pg_catalog.format('It is %s bytes as jsonb; the SQL edition hashes at most %s bytes%s.',
                                   pg_catalog.pg_column_size(pg_catalog.jsonb_path_query_first(%DOC%, '$')), %MAX%,
                                   CASE WHEN %MAX% OPERATOR(pg_catalog.<) 16777216
                                        THEN ' of a request holding a number outside 10^-32..10^33 or with more than 63 decimals' ELSE '' END),
        HINT = 'Send a smaller request, or hash a digest of it; the C build hashes it.';
END IF;
