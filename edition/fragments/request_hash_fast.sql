-- request_hash_fast (edition/build.sh expands "--@ request_hash_fast DOC=.."):
-- idem_request_hash(DOC) for the commonest JSON request, without the call
-- (a call with a SET clause, and its loop over the numbers, cost a replay
-- an eighth of its instructions); NULL for any other, which the caller then
-- hashes by the call.  The commonest: every number an integer below 10^33
-- in magnitude with no display scale (3000, not 3000.0 or 3e3 written
-- 3000.000), and no string holding the stand-in for null members below.
-- Its jsonb text is then its canonical text but for white space and null
-- members (idem_request_hash's first way, which this is).  The numbers are
-- tested without printing them, before the text is printed (a number's
-- text holds its display scale in full: 0e-16383, ten bytes stored, prints
-- 16,385 characters): the array of DOC's numbers is byte for byte (*=,
-- record_image_eq) the array of those below 10^33 made integers by
-- .floor(), which has no display scale.  Time and memory in proportion to
-- DOC's size; only for a request of at most 8192 bytes stored, not
-- compressed (a larger one is hashed by the call, which holds less of it at
-- once and, with many numbers, is faster).  DOC, an expression of type
-- jsonb, is read six times: a column or a variable.
CASE WHEN pg_catalog.pg_column_size(%DOC%) OPERATOR(pg_catalog.>) 8192
          OR pg_catalog.pg_column_compression(%DOC%) IS NOT NULL
     THEN NULL
     WHEN NOT ROW(pg_catalog.jsonb_path_query_array(%DOC%, 'strict $.** ? (@.type() == "number")'))::pg_catalog.record
              OPERATOR(pg_catalog.*=)
              ROW(pg_catalog.jsonb_path_query_array(%DOC%, 'strict $.** ? (@.type() == "number" && @.abs() < 1e33).floor()'))::pg_catalog.record
     THEN NULL
     WHEN pg_catalog.strpos((%DOC%)::pg_catalog.text, '-0.0E-0') OPERATOR(pg_catalog.<>) 0
     THEN NULL
     ELSE pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.replace(pg_catalog.json_strip_nulls(
              pg_catalog.replace((%DOC%)::pg_catalog.text, '": null', '": -0.0E-0')::pg_catalog.json)::pg_catalog.text,
              '-0.0E-0', 'null'), pg_catalog.getdatabaseencoding()))
END
