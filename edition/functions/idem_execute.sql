/*
 * idem_execute(key, request, scope, success_code, query, VARIADIC args) and
 * idem_execute(key, request, scope, success_code, query): claim the key, run
 * the caller's statement in the same transaction, store its result row
 * (to_jsonb of it) with success_code and complete, in one call (src/execute.c).
 *
 * Differences from the C build, all forced by PL/pgSQL:
 * - The C build declares VARIADIC args "any"; PL/pgSQL cannot.  Here it is
 *   VARIADIC args anycompatiblearray: the arguments share one type (their
 *   common type; untyped literals take it).  Arguments of types without a
 *   common one (an integer and a text literal that is not a number: 'A1',
 *   300) fail at the call (22P02 or 42883); cast them to one type (text) and
 *   cast the parameters in the statement ($2::int).  VARIADIC ARRAY[...]
 *   works as in the C build.
 * - The statement's kind is found without running it: the statement is
 *   opened as a cursor (parsed, planned, never run) and closed; PostgreSQL
 *   refuses to open several statements, or one that returns no rows, naming
 *   its command tag; INSERT, UPDATE and DELETE without RETURNING run with
 *   EXECUTE.  Of the statements that do return rows, the utility ones
 *   (SHOW, EXPLAIN, EXECUTE, FETCH, CALL) are told by their first keyword.
 *   A statement a rule rewrites into a NOTIFY is refused as the C build
 *   refuses it (0A000), found by EXPLAIN (FORMAT JSON) of it, run only when
 *   some table has a rule on INSERT, UPDATE or DELETE; its detail says
 *   "is NOTIFY" where the C build, for a statement it had cached before the
 *   rule was made, says "is rewritten into NOTIFY by a rule".  A rule made
 *   between the check and the run of a statement without RETURNING (whose
 *   tables the check does not keep locked) is not seen.  The statement is
 *   parsed and planned (never run) before the claim, and again after it to
 *   run: planning evaluates IMMUTABLE functions of constants before the
 *   claim, where the C build plans only after it.  A SELECT the caller may
 *   not read fails there only when it would run (after the claim), as in
 *   the C build.
 * - The short way's count of subtransactions (at most 32 a transaction)
 *   is kept in the transaction-local setting
 *   idempotency_edition.execute_subxacts, which the caller can change (and
 *   so use more, or fewer, of them).
 * - The function has no SET search_path (the statement resolves names with
 *   the caller's path), so every name of its own is qualified with the
 *   schema it is installed in, written into it when it is created (the DO
 *   block below).  Renaming that schema breaks it, as it breaks the
 *   SET search_path of every other function of the edition.
 */
DO $idem_execute_install$
DECLARE
    schema text := (SELECT pg_catalog.quote_ident(n.nspname)
                      FROM pg_catalog.pg_class c
                      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
                     WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency_token_seq'::pg_catalog.regclass);
BEGIN
    EXECUTE pg_catalog.replace($src$
/*
 * Open (open => true: returns the cursor, nothing run yet) or run
 * (open => false) the caller's statement with the first n elements of a as
 * its parameters $1..$n.  PL/pgSQL's USING takes a fixed list, hence one
 * line per count (the C build takes at most 100 arguments).  SECURITY
 * INVOKER and without SET search_path: the statement runs as the caller,
 * under the caller's search_path, as it would if the caller ran it.
 */
CREATE FUNCTION _IDEM_SCHEMA_.idem__execute_run(query pg_catalog.text, a pg_catalog.anycompatiblearray,
                                                 n pg_catalog.int4, open pg_catalog.bool)
RETURNS pg_catalog.refcursor
LANGUAGE plpgsql VOLATILE
AS $idem__execute_run$
DECLARE
    cur pg_catalog.refcursor;
BEGIN
    IF open THEN
        CASE
        WHEN n OPERATOR(pg_catalog.=) 0 THEN OPEN cur FOR EXECUTE query;
        WHEN n OPERATOR(pg_catalog.=) 1 THEN OPEN cur FOR EXECUTE query USING a[1];
        WHEN n OPERATOR(pg_catalog.=) 2 THEN OPEN cur FOR EXECUTE query USING a[1], a[2];
        WHEN n OPERATOR(pg_catalog.=) 3 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3];
        WHEN n OPERATOR(pg_catalog.=) 4 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4];
        WHEN n OPERATOR(pg_catalog.=) 5 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5];
        WHEN n OPERATOR(pg_catalog.=) 6 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6];
        WHEN n OPERATOR(pg_catalog.=) 7 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7];
        WHEN n OPERATOR(pg_catalog.=) 8 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8];
        WHEN n OPERATOR(pg_catalog.=) 9 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9];
        WHEN n OPERATOR(pg_catalog.=) 10 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10];
        WHEN n OPERATOR(pg_catalog.=) 11 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11];
        WHEN n OPERATOR(pg_catalog.=) 12 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12];
        WHEN n OPERATOR(pg_catalog.=) 13 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13];
        WHEN n OPERATOR(pg_catalog.=) 14 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14];
        WHEN n OPERATOR(pg_catalog.=) 15 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15];
        WHEN n OPERATOR(pg_catalog.=) 16 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16];
        WHEN n OPERATOR(pg_catalog.=) 17 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17];
        WHEN n OPERATOR(pg_catalog.=) 18 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18];
        WHEN n OPERATOR(pg_catalog.=) 19 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19];
        WHEN n OPERATOR(pg_catalog.=) 20 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20];
        WHEN n OPERATOR(pg_catalog.=) 21 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21];
        WHEN n OPERATOR(pg_catalog.=) 22 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22];
        WHEN n OPERATOR(pg_catalog.=) 23 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23];
        WHEN n OPERATOR(pg_catalog.=) 24 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24];
        WHEN n OPERATOR(pg_catalog.=) 25 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25];
        WHEN n OPERATOR(pg_catalog.=) 26 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26];
        WHEN n OPERATOR(pg_catalog.=) 27 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27];
        WHEN n OPERATOR(pg_catalog.=) 28 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28];
        WHEN n OPERATOR(pg_catalog.=) 29 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29];
        WHEN n OPERATOR(pg_catalog.=) 30 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30];
        WHEN n OPERATOR(pg_catalog.=) 31 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31];
        WHEN n OPERATOR(pg_catalog.=) 32 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32];
        WHEN n OPERATOR(pg_catalog.=) 33 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33];
        WHEN n OPERATOR(pg_catalog.=) 34 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34];
        WHEN n OPERATOR(pg_catalog.=) 35 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35];
        WHEN n OPERATOR(pg_catalog.=) 36 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36];
        WHEN n OPERATOR(pg_catalog.=) 37 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37];
        WHEN n OPERATOR(pg_catalog.=) 38 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38];
        WHEN n OPERATOR(pg_catalog.=) 39 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39];
        WHEN n OPERATOR(pg_catalog.=) 40 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40];
        WHEN n OPERATOR(pg_catalog.=) 41 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41];
        WHEN n OPERATOR(pg_catalog.=) 42 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42];
        WHEN n OPERATOR(pg_catalog.=) 43 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43];
        WHEN n OPERATOR(pg_catalog.=) 44 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44];
        WHEN n OPERATOR(pg_catalog.=) 45 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45];
        WHEN n OPERATOR(pg_catalog.=) 46 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46];
        WHEN n OPERATOR(pg_catalog.=) 47 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47];
        WHEN n OPERATOR(pg_catalog.=) 48 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48];
        WHEN n OPERATOR(pg_catalog.=) 49 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49];
        WHEN n OPERATOR(pg_catalog.=) 50 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50];
        WHEN n OPERATOR(pg_catalog.=) 51 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51];
        WHEN n OPERATOR(pg_catalog.=) 52 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52];
        WHEN n OPERATOR(pg_catalog.=) 53 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53];
        WHEN n OPERATOR(pg_catalog.=) 54 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54];
        WHEN n OPERATOR(pg_catalog.=) 55 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55];
        WHEN n OPERATOR(pg_catalog.=) 56 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56];
        WHEN n OPERATOR(pg_catalog.=) 57 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57];
        WHEN n OPERATOR(pg_catalog.=) 58 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58];
        WHEN n OPERATOR(pg_catalog.=) 59 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59];
        WHEN n OPERATOR(pg_catalog.=) 60 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60];
        WHEN n OPERATOR(pg_catalog.=) 61 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61];
        WHEN n OPERATOR(pg_catalog.=) 62 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62];
        WHEN n OPERATOR(pg_catalog.=) 63 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63];
        WHEN n OPERATOR(pg_catalog.=) 64 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64];
        WHEN n OPERATOR(pg_catalog.=) 65 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65];
        WHEN n OPERATOR(pg_catalog.=) 66 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66];
        WHEN n OPERATOR(pg_catalog.=) 67 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67];
        WHEN n OPERATOR(pg_catalog.=) 68 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68];
        WHEN n OPERATOR(pg_catalog.=) 69 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69];
        WHEN n OPERATOR(pg_catalog.=) 70 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70];
        WHEN n OPERATOR(pg_catalog.=) 71 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71];
        WHEN n OPERATOR(pg_catalog.=) 72 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72];
        WHEN n OPERATOR(pg_catalog.=) 73 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73];
        WHEN n OPERATOR(pg_catalog.=) 74 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74];
        WHEN n OPERATOR(pg_catalog.=) 75 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75];
        WHEN n OPERATOR(pg_catalog.=) 76 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76];
        WHEN n OPERATOR(pg_catalog.=) 77 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77];
        WHEN n OPERATOR(pg_catalog.=) 78 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78];
        WHEN n OPERATOR(pg_catalog.=) 79 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79];
        WHEN n OPERATOR(pg_catalog.=) 80 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80];
        WHEN n OPERATOR(pg_catalog.=) 81 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81];
        WHEN n OPERATOR(pg_catalog.=) 82 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82];
        WHEN n OPERATOR(pg_catalog.=) 83 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83];
        WHEN n OPERATOR(pg_catalog.=) 84 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84];
        WHEN n OPERATOR(pg_catalog.=) 85 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85];
        WHEN n OPERATOR(pg_catalog.=) 86 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86];
        WHEN n OPERATOR(pg_catalog.=) 87 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87];
        WHEN n OPERATOR(pg_catalog.=) 88 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88];
        WHEN n OPERATOR(pg_catalog.=) 89 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89];
        WHEN n OPERATOR(pg_catalog.=) 90 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90];
        WHEN n OPERATOR(pg_catalog.=) 91 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91];
        WHEN n OPERATOR(pg_catalog.=) 92 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92];
        WHEN n OPERATOR(pg_catalog.=) 93 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93];
        WHEN n OPERATOR(pg_catalog.=) 94 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94];
        WHEN n OPERATOR(pg_catalog.=) 95 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95];
        WHEN n OPERATOR(pg_catalog.=) 96 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96];
        WHEN n OPERATOR(pg_catalog.=) 97 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96], a[97];
        WHEN n OPERATOR(pg_catalog.=) 98 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96], a[97], a[98];
        WHEN n OPERATOR(pg_catalog.=) 99 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96], a[97], a[98], a[99];
        WHEN n OPERATOR(pg_catalog.=) 100 THEN OPEN cur FOR EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96], a[97], a[98], a[99], a[100];
        END CASE;
        RETURN cur;
    END IF;
    CASE
    WHEN n OPERATOR(pg_catalog.=) 0 THEN EXECUTE query;
    WHEN n OPERATOR(pg_catalog.=) 1 THEN EXECUTE query USING a[1];
    WHEN n OPERATOR(pg_catalog.=) 2 THEN EXECUTE query USING a[1], a[2];
    WHEN n OPERATOR(pg_catalog.=) 3 THEN EXECUTE query USING a[1], a[2], a[3];
    WHEN n OPERATOR(pg_catalog.=) 4 THEN EXECUTE query USING a[1], a[2], a[3], a[4];
    WHEN n OPERATOR(pg_catalog.=) 5 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5];
    WHEN n OPERATOR(pg_catalog.=) 6 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6];
    WHEN n OPERATOR(pg_catalog.=) 7 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7];
    WHEN n OPERATOR(pg_catalog.=) 8 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8];
    WHEN n OPERATOR(pg_catalog.=) 9 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9];
    WHEN n OPERATOR(pg_catalog.=) 10 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10];
    WHEN n OPERATOR(pg_catalog.=) 11 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11];
    WHEN n OPERATOR(pg_catalog.=) 12 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12];
    WHEN n OPERATOR(pg_catalog.=) 13 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13];
    WHEN n OPERATOR(pg_catalog.=) 14 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14];
    WHEN n OPERATOR(pg_catalog.=) 15 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15];
    WHEN n OPERATOR(pg_catalog.=) 16 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16];
    WHEN n OPERATOR(pg_catalog.=) 17 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17];
    WHEN n OPERATOR(pg_catalog.=) 18 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18];
    WHEN n OPERATOR(pg_catalog.=) 19 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19];
    WHEN n OPERATOR(pg_catalog.=) 20 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20];
    WHEN n OPERATOR(pg_catalog.=) 21 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21];
    WHEN n OPERATOR(pg_catalog.=) 22 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22];
    WHEN n OPERATOR(pg_catalog.=) 23 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23];
    WHEN n OPERATOR(pg_catalog.=) 24 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24];
    WHEN n OPERATOR(pg_catalog.=) 25 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25];
    WHEN n OPERATOR(pg_catalog.=) 26 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26];
    WHEN n OPERATOR(pg_catalog.=) 27 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27];
    WHEN n OPERATOR(pg_catalog.=) 28 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28];
    WHEN n OPERATOR(pg_catalog.=) 29 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29];
    WHEN n OPERATOR(pg_catalog.=) 30 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30];
    WHEN n OPERATOR(pg_catalog.=) 31 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31];
    WHEN n OPERATOR(pg_catalog.=) 32 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32];
    WHEN n OPERATOR(pg_catalog.=) 33 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33];
    WHEN n OPERATOR(pg_catalog.=) 34 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34];
    WHEN n OPERATOR(pg_catalog.=) 35 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35];
    WHEN n OPERATOR(pg_catalog.=) 36 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36];
    WHEN n OPERATOR(pg_catalog.=) 37 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37];
    WHEN n OPERATOR(pg_catalog.=) 38 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38];
    WHEN n OPERATOR(pg_catalog.=) 39 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39];
    WHEN n OPERATOR(pg_catalog.=) 40 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40];
    WHEN n OPERATOR(pg_catalog.=) 41 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41];
    WHEN n OPERATOR(pg_catalog.=) 42 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42];
    WHEN n OPERATOR(pg_catalog.=) 43 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43];
    WHEN n OPERATOR(pg_catalog.=) 44 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44];
    WHEN n OPERATOR(pg_catalog.=) 45 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45];
    WHEN n OPERATOR(pg_catalog.=) 46 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46];
    WHEN n OPERATOR(pg_catalog.=) 47 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47];
    WHEN n OPERATOR(pg_catalog.=) 48 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48];
    WHEN n OPERATOR(pg_catalog.=) 49 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49];
    WHEN n OPERATOR(pg_catalog.=) 50 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50];
    WHEN n OPERATOR(pg_catalog.=) 51 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51];
    WHEN n OPERATOR(pg_catalog.=) 52 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52];
    WHEN n OPERATOR(pg_catalog.=) 53 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53];
    WHEN n OPERATOR(pg_catalog.=) 54 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54];
    WHEN n OPERATOR(pg_catalog.=) 55 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55];
    WHEN n OPERATOR(pg_catalog.=) 56 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56];
    WHEN n OPERATOR(pg_catalog.=) 57 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57];
    WHEN n OPERATOR(pg_catalog.=) 58 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58];
    WHEN n OPERATOR(pg_catalog.=) 59 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59];
    WHEN n OPERATOR(pg_catalog.=) 60 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60];
    WHEN n OPERATOR(pg_catalog.=) 61 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61];
    WHEN n OPERATOR(pg_catalog.=) 62 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62];
    WHEN n OPERATOR(pg_catalog.=) 63 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63];
    WHEN n OPERATOR(pg_catalog.=) 64 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64];
    WHEN n OPERATOR(pg_catalog.=) 65 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65];
    WHEN n OPERATOR(pg_catalog.=) 66 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66];
    WHEN n OPERATOR(pg_catalog.=) 67 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67];
    WHEN n OPERATOR(pg_catalog.=) 68 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68];
    WHEN n OPERATOR(pg_catalog.=) 69 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69];
    WHEN n OPERATOR(pg_catalog.=) 70 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70];
    WHEN n OPERATOR(pg_catalog.=) 71 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71];
    WHEN n OPERATOR(pg_catalog.=) 72 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72];
    WHEN n OPERATOR(pg_catalog.=) 73 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73];
    WHEN n OPERATOR(pg_catalog.=) 74 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74];
    WHEN n OPERATOR(pg_catalog.=) 75 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75];
    WHEN n OPERATOR(pg_catalog.=) 76 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76];
    WHEN n OPERATOR(pg_catalog.=) 77 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77];
    WHEN n OPERATOR(pg_catalog.=) 78 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78];
    WHEN n OPERATOR(pg_catalog.=) 79 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79];
    WHEN n OPERATOR(pg_catalog.=) 80 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80];
    WHEN n OPERATOR(pg_catalog.=) 81 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81];
    WHEN n OPERATOR(pg_catalog.=) 82 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82];
    WHEN n OPERATOR(pg_catalog.=) 83 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83];
    WHEN n OPERATOR(pg_catalog.=) 84 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84];
    WHEN n OPERATOR(pg_catalog.=) 85 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85];
    WHEN n OPERATOR(pg_catalog.=) 86 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86];
    WHEN n OPERATOR(pg_catalog.=) 87 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87];
    WHEN n OPERATOR(pg_catalog.=) 88 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88];
    WHEN n OPERATOR(pg_catalog.=) 89 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89];
    WHEN n OPERATOR(pg_catalog.=) 90 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90];
    WHEN n OPERATOR(pg_catalog.=) 91 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91];
    WHEN n OPERATOR(pg_catalog.=) 92 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92];
    WHEN n OPERATOR(pg_catalog.=) 93 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93];
    WHEN n OPERATOR(pg_catalog.=) 94 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94];
    WHEN n OPERATOR(pg_catalog.=) 95 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95];
    WHEN n OPERATOR(pg_catalog.=) 96 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96];
    WHEN n OPERATOR(pg_catalog.=) 97 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96], a[97];
    WHEN n OPERATOR(pg_catalog.=) 98 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96], a[97], a[98];
    WHEN n OPERATOR(pg_catalog.=) 99 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96], a[97], a[98], a[99];
    WHEN n OPERATOR(pg_catalog.=) 100 THEN EXECUTE query USING a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39], a[40], a[41], a[42], a[43], a[44], a[45], a[46], a[47], a[48], a[49], a[50], a[51], a[52], a[53], a[54], a[55], a[56], a[57], a[58], a[59], a[60], a[61], a[62], a[63], a[64], a[65], a[66], a[67], a[68], a[69], a[70], a[71], a[72], a[73], a[74], a[75], a[76], a[77], a[78], a[79], a[80], a[81], a[82], a[83], a[84], a[85], a[86], a[87], a[88], a[89], a[90], a[91], a[92], a[93], a[94], a[95], a[96], a[97], a[98], a[99], a[100];
    END CASE;
    RETURN NULL;
END
$idem__execute_run$;
REVOKE ALL ON FUNCTION _IDEM_SCHEMA_.idem__execute_run(pg_catalog.text, pg_catalog.anycompatiblearray, pg_catalog.int4, pg_catalog.bool) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _IDEM_SCHEMA_.idem__execute_run(pg_catalog.text, pg_catalog.anycompatiblearray, pg_catalog.int4, pg_catalog.bool) TO idempotency_app;

/*
 * The statement's kind, before it runs: raises 42601 for several
 * statements, 0A000 for a kind idem_execute does not run (the C build's
 * CheckStatementKind and CheckPlannedKind), and whatever parsing or
 * planning it raises; returns whether it returns rows.  Without SET
 * search_path, as idem__execute_run: the statement is the caller's.
 */
CREATE FUNCTION _IDEM_SCHEMA_.idem__execute_check(query pg_catalog.text, args pg_catalog.anycompatiblearray,
                                                   n pg_catalog.int4, key pg_catalog.text, scope pg_catalog.text)
RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE
AS $idem__execute_check$
DECLARE
    returns_rows pg_catalog.bool := false;
    tag pg_catalog.text;
    single pg_catalog.bool := true;
    msg pg_catalog.text;
    tmpl pg_catalog.text;
    m pg_catalog.text[];
    word pg_catalog.text;
    depth pg_catalog.int4 := 0;
    in_line pg_catalog.bool := false;
    tok pg_catalog.text;
    cur pg_catalog.refcursor;
    probe pg_catalog.refcursor;
    plan pg_catalog.json;
BEGIN
    /*
     * The statement's kind, before anything is claimed: opened as a cursor
     * (parsed and planned, not run) and closed.  PostgreSQL refuses to open
     * several statements, or one without result rows (naming its command
     * tag); those are told apart by the message, in the server's language.
     */
    BEGIN
        cur := _IDEM_SCHEMA_.idem__execute_run(query, args, n, true);
        CLOSE cur;
        returns_rows := true;
    EXCEPTION
        WHEN invalid_cursor_definition THEN
            msg := SQLERRM;
            m := pg_catalog.regexp_match(msg, '^cannot open (.+) query as cursor$');
            IF m IS NOT NULL THEN
                tag := m[1];
            ELSIF msg OPERATOR(pg_catalog.=) 'cannot open multi-query plan as cursor' THEN
                single := false;
            ELSE
                /* messages in another language: the same refusal of a known tag */
                BEGIN
                    OPEN probe FOR EXECUTE 'NOTIFY idem_execute_probe';
                    CLOSE probe;
                EXCEPTION WHEN invalid_cursor_definition THEN
                    tmpl := SQLERRM;
                END;
                m := pg_catalog.regexp_match(tmpl, '^(.*)NOTIFY(.*)$');
                IF m IS NOT NULL
                   AND pg_catalog.starts_with(msg, m[1])
                   AND pg_catalog.right(msg, pg_catalog.length(m[2])) OPERATOR(pg_catalog.=) m[2]
                   AND pg_catalog.length(msg) OPERATOR(pg_catalog.>) (pg_catalog.length(m[1]) OPERATOR(pg_catalog.+) pg_catalog.length(m[2])) THEN
                    tag := pg_catalog.substr(msg, pg_catalog.length(m[1]) OPERATOR(pg_catalog.+) 1,
                                             (pg_catalog.length(msg) OPERATOR(pg_catalog.-) pg_catalog.length(m[1])) OPERATOR(pg_catalog.-) pg_catalog.length(m[2]));
                ELSE
                    single := false;
                END IF;
            END IF;
        WHEN insufficient_privilege THEN
            /*
             * A SELECT checks its privileges when it is opened; the C build
             * checks them when it runs, after the claim.  The run opens it
             * again (and fails there for a new key).
             */
            returns_rows := true;
    END;
    IF NOT single THEN
        RAISE EXCEPTION USING ERRCODE = '42601',
            MESSAGE = 'statement given to idem_execute must be a single statement',
            DETAIL = pg_catalog.format('Key "%s" in scope "%s".', key, scope);
    END IF;
    IF returns_rows THEN
        /*
         * Utility statements that return rows begin with their keyword:
         * the first word after blanks and comments (nested /* */, --).
         * Linear: one pass of one regular expression over the text, left
         * at the first word.
         */
        word := pg_catalog.upper((pg_catalog.regexp_match(query, E'^\\s*([A-Za-z_]+)'))[1]);
        IF word IS NULL THEN
            /* a -- comment ends at a newline or a carriage return, as in scan.l */
            FOR tok IN SELECT t[1] FROM pg_catalog.regexp_matches(query, E'(/\\*|\\*/|--|\\n|\\r|[ \\t\\f\\v]+|[A-Za-z_]+|.)', 'g') AS t LOOP
                IF in_line THEN
                    in_line := tok OPERATOR(pg_catalog.<>) E'\n' AND tok OPERATOR(pg_catalog.<>) E'\r';
                ELSIF depth OPERATOR(pg_catalog.>) 0 THEN
                    IF tok OPERATOR(pg_catalog.=) '/*' THEN
                        depth := depth OPERATOR(pg_catalog.+) 1;
                    ELSIF tok OPERATOR(pg_catalog.=) '*/' THEN
                        depth := depth OPERATOR(pg_catalog.-) 1;
                    END IF;
                ELSIF tok OPERATOR(pg_catalog.=) '--' THEN
                    in_line := true;
                ELSIF tok OPERATOR(pg_catalog.=) '/*' THEN
                    depth := 1;
                ELSIF tok OPERATOR(pg_catalog.~) E'^\\s+$' THEN
                    NULL;
                ELSE
                    word := pg_catalog.upper(tok);
                    EXIT;
                END IF;
            END LOOP;
        END IF;
        IF word OPERATOR(pg_catalog.=) ANY (ARRAY['SHOW', 'EXPLAIN', 'EXECUTE', 'FETCH', 'CALL']) THEN
            tag := word;
        END IF;
    ELSIF tag OPERATOR(pg_catalog.=) 'SELECT' THEN
        tag := 'SELECT INTO';	/* a SELECT without result rows writes a table */
    ELSIF tag OPERATOR(pg_catalog.=) ANY (ARRAY['INSERT', 'UPDATE', 'DELETE']) THEN
        tag := NULL;			/* without RETURNING: runs, stores no response */
    END IF;
    /*
     * What a rule makes of it: a rule's action may be a NOTIFY (the only
     * utility statement a rule can hold), which the C build refuses as the
     * statement's kind.  Only when a table of the database has a rule on
     * INSERT, UPDATE or DELETE: EXPLAIN of the statement (planned, not run)
     * names a utility statement by a string where a plan would be.
     */
    IF tag IS NULL AND EXISTS (SELECT FROM pg_catalog.pg_rewrite w
                                WHERE w.ev_type OPERATOR(pg_catalog.<>) '1'
                                  AND w.ev_class OPERATOR(pg_catalog.>=) 16384::pg_catalog.oid) THEN
        cur := _IDEM_SCHEMA_.idem__execute_run('EXPLAIN (FORMAT JSON) ' OPERATOR(pg_catalog.||) query, args, n, true);
        FETCH cur INTO plan;
        CLOSE cur;
        SELECT pg_catalog.upper(e.value OPERATOR(pg_catalog.#>>) '{}') INTO tag
          FROM pg_catalog.jsonb_array_elements(plan::pg_catalog.jsonb) AS e
         WHERE pg_catalog.jsonb_typeof(e.value) OPERATOR(pg_catalog.=) 'string'
         LIMIT 1;
    END IF;
    IF tag IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '0A000',
            MESSAGE = 'idem_execute runs only SELECT, INSERT, UPDATE and DELETE statements',
            DETAIL = pg_catalog.format('The statement given for key "%s" in scope "%s" is %s.', key, scope, tag),
            HINT = 'Run other statements yourself, around the explicit pattern idem_claim, then idem_complete.';
    END IF;
    RETURN returns_rows;
END
$idem__execute_check$;
REVOKE ALL ON FUNCTION _IDEM_SCHEMA_.idem__execute_check(pg_catalog.text, pg_catalog.anycompatiblearray, pg_catalog.int4, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _IDEM_SCHEMA_.idem__execute_check(pg_catalog.text, pg_catalog.anycompatiblearray, pg_catalog.int4, pg_catalog.text, pg_catalog.text) TO idempotency_app;

CREATE FUNCTION _IDEM_SCHEMA_.idem_execute(
    key pg_catalog.text,
    request pg_catalog.jsonb,
    scope pg_catalog.text,
    success_code pg_catalog.int4,
    query pg_catalog.text,
    VARIADIC args pg_catalog.anycompatiblearray,
    OUT outcome pg_catalog.text,
    OUT token pg_catalog.int8,
    OUT status _IDEM_SCHEMA_.idempotency_status,
    OUT response_code pg_catalog.int4,
    OUT response pg_catalog.jsonb,
    OUT retry_after pg_catalog.interval,
    OUT recovery_point pg_catalog.text)
RETURNS record
LANGUAGE plpgsql VOLATILE
AS $idem_execute$
DECLARE
    n pg_catalog.int4 := COALESCE(pg_catalog.cardinality(args), 0);
    returns_rows pg_catalog.bool := false;
    cur pg_catalog.refcursor;
    r record;
    extra record;
    claimed record;
    k record;
    row_found pg_catalog.bool;
    subxacts pg_catalog.int4;
    subxacts_set pg_catalog.text;
    short_done pg_catalog.bool;
    stmt_ran pg_catalog.bool;
    pre_claimed pg_catalog.bool := false;
    new_token pg_catalog.int8;
    stamp pg_catalog.timestamptz;
    caller_path pg_catalog.text;
    resp pg_catalog.jsonb;
    maxlen pg_catalog.int4;
    times pg_catalog.interval[];    /* (assignments, not PERFORM: no query) */
    ret pg_catalog.interval;
    done pg_catalog.text;
    req_hash pg_catalog.bytea;
    kr record;
    ckey pg_catalog.text;
    checked pg_catalog.text;
    hit pg_catalog.bool;
    pos pg_catalog.int4;
    kind_checked pg_catalog.bool := false;
BEGIN
    IF query IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'statement must not be null',
            HINT = 'Pass the statement that does the work, such as the payment''s INSERT.';
    END IF;
    IF n OPERATOR(pg_catalog.>) 100 THEN
        RAISE EXCEPTION USING ERRCODE = '54000',
            MESSAGE = 'idem_execute takes at most 100 statement arguments';
    END IF;
    /* the elements in order, as $1..$n, whatever the array's shape */
    IF n OPERATOR(pg_catalog.>) 0 AND (pg_catalog.array_ndims(args) OPERATOR(pg_catalog.>) 1
                                       OR pg_catalog.array_lower(args, 1) OPERATOR(pg_catalog.<>) 1) THEN
        args := ARRAY(SELECT pg_catalog.unnest(args));
    END IF;

    /* what the C build checks before the statement: the key, the times, read-only */
    --@ check_key KEY=key SCOPE=scope SCHEMA=_IDEM_SCHEMA_.
    /*
     * The lease and the retention, read from their settings (1 s to 2^31-1 s,
     * checked there), pass idem__check_interval always: read for their
     * errors only, so only when set (each of the settings' functions is a
     * call with a SET clause: idem_claim reads them so too).
     */
    IF COALESCE(pg_catalog.current_setting('idempotency.lease', true), '') OPERATOR(pg_catalog.<>) ''
       OR COALESCE(pg_catalog.current_setting('idempotency.retention', true), '') OPERATOR(pg_catalog.<>) '' THEN
        times := ARRAY[_IDEM_SCHEMA_.idem__lease(), _IDEM_SCHEMA_.idem__retention()];
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
        RAISE EXCEPTION USING ERRCODE = '25006',
            MESSAGE = 'cannot execute idem_execute() in a read-only transaction';
    END IF;

    /*
     * Statements already checked in this session, as the C build keeps up
     * to 16 prepared per backend (src/execute.c): the SHA-256 of the text,
     * the number of arguments and their type, then r (it returns rows) or
     * n, in a session setting of the most recent 16.  The C build
     * prepares, and so checks, a statement it has not kept before anything
     * else; one it has kept it checks when it runs it, after the claim
     * (its plan revalidated).  So here: a statement not kept is checked
     * first; a kept one is not, and is checked again before it runs only
     * when a table of the database has a rule on INSERT, UPDATE or DELETE:
     * without one, its kind and whether it returns rows follow from its
     * text (a rule is what can turn it into another kind; parsing and
     * planning it raise when it runs what they would have raised here).
     * So a replay of a kept statement, or a row the claim answers (IK001,
     * in_progress, ...), is answered without the check, as in the C build.
     * A session can write the setting itself, and so have a statement run
     * unchecked (of another kind, or several): as it could run it itself,
     * the statement runs as the caller, under the caller's privileges and
     * search_path, and the key's row is checked after it as always.  A
     * transaction rolled back forgets what it added (a setting's rule),
     * and checks again.
     */
    ckey := pg_catalog.encode(pg_catalog.sha256(pg_catalog.textsend(query)
                                                OPERATOR(pg_catalog.||) pg_catalog.int4send(n)
                                                OPERATOR(pg_catalog.||) pg_catalog.oidsend(pg_catalog.pg_typeof(args)::pg_catalog.oid)), 'hex');
    checked := COALESCE(pg_catalog.current_setting('idempotency_edition.execute_checked', true), '');
    pos := pg_catalog.strpos(checked, ckey);
    hit := pos OPERATOR(pg_catalog.>) 0;
    IF hit THEN
        returns_rows := pg_catalog.substr(checked, pos OPERATOR(pg_catalog.+) 64, 1) OPERATOR(pg_catalog.=) 'r';
    END IF;
    /* a statement not kept: its kind (idem__execute_check), then kept */
    IF NOT hit THEN
        returns_rows := _IDEM_SCHEMA_.idem__execute_check(query, args, n, key, scope);
        kind_checked := true;
        done := pg_catalog.set_config('idempotency_edition.execute_checked',
                                      ckey OPERATOR(pg_catalog.||) CASE WHEN returns_rows THEN 'r ' ELSE 'n ' END
                                      OPERATOR(pg_catalog.||) pg_catalog.left(checked, 66 OPERATOR(pg_catalog.*) 15), false);
    END IF;

    /*
     * A key without a row, the short way (src/execute.c): with the key's
     * lock (tried: another transaction holding it is writing the key, and
     * the general way waits for it), the statement runs in a subtransaction,
     * then the row is inserted already completed, with its response.  A
     * concurrent claim that got there first makes the INSERT (or the
     * statement, on a unique index or a deadlock they share) fail: the
     * subtransaction is rolled back, the statement's work with it, and the
     * general way below finds out.  At most 32 per transaction (then the
     * general way), and only when writing the key's row cannot be refused
     * to the caller (INSERT privilege, no row level security): otherwise
     * the claim is written first, so that a scope the caller may not use is
     * refused before its statement starts.
     */
    /* (no NULLIF, IS DISTINCT FROM or IN here: they find = on the caller's search_path) */
    /* (a value that is not a count, which the caller can set: 32, the general way) */
    subxacts_set := COALESCE(pg_catalog.current_setting('idempotency_edition.execute_subxacts', true), '');
    subxacts := CASE WHEN subxacts_set OPERATOR(pg_catalog.=) '' THEN 0
                     WHEN subxacts_set OPERATOR(pg_catalog.~) '^[0-9]{1,9}$' THEN subxacts_set::pg_catalog.int4
                     ELSE 32 END;
    IF subxacts OPERATOR(pg_catalog.<) 32
       AND pg_catalog.has_table_privilege('_IDEM_SCHEMA_.idempotency_keys', 'INSERT')
       AND NOT pg_catalog.row_security_active('_IDEM_SCHEMA_.idempotency_keys') THEN
        IF
            --@ row_security_in_use SCHEMA=_IDEM_SCHEMA_.
        THEN
            PERFORM _IDEM_SCHEMA_.idem__check_row_security();
        END IF;
        IF NOT EXISTS (SELECT FROM _IDEM_SCHEMA_.idempotency_keys i
                        WHERE i.scope OPERATOR(pg_catalog.=) idem_execute.scope
                          AND i.key OPERATOR(pg_catalog.=) idem_execute.key)
           AND _IDEM_SCHEMA_.idem__lock_key(scope, key, false) THEN
            /* a statement kept, about to run: checked again if a rule may have changed it */
            IF NOT kind_checked AND EXISTS (SELECT FROM pg_catalog.pg_rewrite w
                                             WHERE w.ev_type OPERATOR(pg_catalog.<>) '1'
                                               AND w.ev_class OPERATOR(pg_catalog.>=) 16384::pg_catalog.oid) THEN
                returns_rows := _IDEM_SCHEMA_.idem__execute_check(query, args, n, key, scope);
            END IF;
            kind_checked := true;
            done := pg_catalog.set_config('idempotency_edition.execute_subxacts',
                                          (subxacts OPERATOR(pg_catalog.+) 1)::pg_catalog.text, true);
            short_done := false;
            stmt_ran := false;
            BEGIN
                IF returns_rows THEN
                    cur := _IDEM_SCHEMA_.idem__execute_run(query, args, n, true);
                    FETCH cur INTO r;
                    IF FOUND THEN
                        FETCH cur INTO extra;
                        IF FOUND THEN
                            RAISE EXCEPTION USING ERRCODE = '21000',
                                MESSAGE = 'statement given to idem_execute returned more than one row',
                                DETAIL = pg_catalog.format('Key "%s" in scope "%s".', key, scope),
                                HINT = 'Its result row is the stored response; return one row, or none.';
                        END IF;
                        resp := pg_catalog.to_jsonb(r);
                    END IF;
                    CLOSE cur;
                ELSE
                    PERFORM _IDEM_SCHEMA_.idem__execute_run(query, args, n, false);
                END IF;
                stmt_ran := true;
                IF resp IS NOT NULL AND NOT _IDEM_SCHEMA_.idem_row_storable(resp, NULL::pg_catalog.text, NULL::pg_catalog.bytea) THEN
                    RAISE EXCEPTION USING ERRCODE = '54000', MESSAGE = 'response is too large to store',
                        DETAIL = pg_catalog.format('The response for key "%s" in scope "%s" is longer than %s MB as text or %s MB as jsonb, or larger than %s kB and nested more than %s levels deep; pg_dump writes each row in one piece of at most 1 GB.',
                                                   key, scope, 256, 64, 8, 16),
                        HINT = 'Store a reference to the body, or a digest of it, instead.';
                END IF;
                --@ next_token VAR=new_token SEQ=_IDEM_SCHEMA_.idempotency_token_seq
                /*
                 * the key's row is written under the C build's search_path
                 * (a trigger on the table runs under it), the statement ran
                 * and runs under the caller's; a rollback of this block
                 * undoes the set_config too
                 */
                caller_path := pg_catalog.current_setting('search_path');
                PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
                /* the times, after the statement */
                ret := CASE WHEN COALESCE(pg_catalog.current_setting('idempotency.retention', true), '')
                                 OPERATOR(pg_catalog.=) ''
                            THEN pg_catalog.make_interval(secs => 86400)
                            ELSE _IDEM_SCHEMA_.idem__retention() END;
                /*
                 * the hash by an assignment, not inside the INSERT: there a
                 * custom plan, where the request is a constant, would
                 * compute it while planning, whatever request_hash_fast's
                 * bounds (edition/build.sh checks every expansion)
                 */
                req_hash := COALESCE(
                    --@ request_hash_fast DOC=request
                    , _IDEM_SCHEMA_.idem_request_hash(request));
                stamp := pg_catalog.clock_timestamp();
                INSERT INTO _IDEM_SCHEMA_.idempotency_keys (scope, key, status, token, created_at, updated_at,
                                                            expires_at, request_hash, response_code, response, due_at)
                VALUES (idem_execute.scope, idem_execute.key, 'completed', new_token, stamp, stamp,
                        stamp OPERATOR(pg_catalog.+) ret, req_hash,
                        success_code, resp, stamp OPERATOR(pg_catalog.+) ret);
                PERFORM pg_catalog.set_config('search_path', caller_path, true);
                short_done := true;
            EXCEPTION WHEN unique_violation OR deadlock_detected THEN
                resp := NULL;	/* undone: the general way finds out why */
                IF NOT stmt_ran THEN
                    /*
                     * the statement's own error: the general way's claim,
                     * here, says whether a concurrent claim explains it; when
                     * the key is free to run it (new or reclaimed) nothing
                     * does, and the error is the caller's, the statement run
                     * once (the general way would run it again)
                     */
                    SELECT * INTO claimed
                      FROM _IDEM_SCHEMA_.idem_claim(key, request, scope, NULL::pg_catalog.interval, NULL::pg_catalog.interval, true, NULL::pg_catalog.interval, NULL::pg_catalog.int4);
                    IF claimed.outcome OPERATOR(pg_catalog.=) ANY (ARRAY['new', 'reclaimed']) THEN
                        RAISE;
                    END IF;
                    pre_claimed := true;	/* its answer, below */
                END IF;
            END;
            IF short_done THEN
                outcome := 'new';
                token := new_token;
                status := 'completed';
                response_code := success_code;
                response := resp;
                RETURN;
            END IF;
        END IF;
    END IF;

    IF NOT pre_claimed THEN
        /*
         * A replay without the nested idem_claim: what it would check, read and
         * decide before its answer replay, in its order (the settings it reads,
         * the request hash, row level security in place; the rest it checks
         * idem_execute has checked above with the same arguments), for a row
         * not expired, with the same request, completed or failed for good.
         * Anything else (and any error) is the claim's, which reads it all again.
         */
        IF COALESCE(pg_catalog.current_setting('idempotency.max_attempts', true), '') OPERATOR(pg_catalog.<>) '' THEN
            done := _IDEM_SCHEMA_.idem__max_attempts()::pg_catalog.text;
        END IF;
        IF COALESCE(pg_catalog.current_setting('idempotency.await_result', true), '') OPERATOR(pg_catalog.<>) '' THEN
            times := ARRAY[_IDEM_SCHEMA_.idem__await_result()];
        END IF;
        req_hash := COALESCE(
            --@ request_hash_fast DOC=request
            , _IDEM_SCHEMA_.idem_request_hash(request));
        IF
            --@ row_security_in_use SCHEMA=_IDEM_SCHEMA_.
        THEN
            PERFORM _IDEM_SCHEMA_.idem__check_row_security();
        END IF;
        SELECT i.* INTO kr FROM _IDEM_SCHEMA_.idempotency_keys i
         WHERE i.scope OPERATOR(pg_catalog.=) idem_execute.scope
           AND i.key OPERATOR(pg_catalog.=) idem_execute.key;
        IF FOUND AND kr.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
           AND (kr.request_hash OPERATOR(pg_catalog.=) req_hash OR (kr.request_hash IS NULL AND req_hash IS NULL))
           AND (kr.status OPERATOR(pg_catalog.=) 'completed'
                OR (kr.status OPERATOR(pg_catalog.=) 'failed' AND NOT kr.retryable)) THEN
            outcome := 'replay';
            status := kr.status;
            response_code := kr.response_code;
            response := kr.response;
            RETURN;
        END IF;

        /* the claim; always waits for an uncommitted duplicate */
        SELECT * INTO claimed
          FROM _IDEM_SCHEMA_.idem_claim(key, request, scope, NULL::pg_catalog.interval, NULL::pg_catalog.interval, true, NULL::pg_catalog.interval, NULL::pg_catalog.int4);
    END IF;
    outcome := claimed.outcome;
    token := claimed.token;
    status := claimed.status;
    response_code := claimed.response_code;
    response := claimed.response;
    retry_after := claimed.retry_after;
    recovery_point := claimed.recovery_point;
    IF outcome OPERATOR(pg_catalog.<>) ALL (ARRAY['new', 'reclaimed']) THEN
        RETURN;
    END IF;
    /* a statement kept, not checked in this call: checked before it runs if a rule may change it */
    IF NOT kind_checked AND EXISTS (SELECT FROM pg_catalog.pg_rewrite w
                                     WHERE w.ev_type OPERATOR(pg_catalog.<>) '1'
                                       AND w.ev_class OPERATOR(pg_catalog.>=) 16384::pg_catalog.oid) THEN
        returns_rows := _IDEM_SCHEMA_.idem__execute_check(query, args, n, key, scope);
    END IF;

    /* the work, as the caller, under the caller's search_path */
    IF returns_rows THEN
        cur := _IDEM_SCHEMA_.idem__execute_run(query, args, n, true);
        FETCH cur INTO r;
        IF FOUND THEN
            FETCH cur INTO extra;
            IF FOUND THEN
                RAISE EXCEPTION USING ERRCODE = '21000',
                    MESSAGE = 'statement given to idem_execute returned more than one row',
                    DETAIL = pg_catalog.format('Key "%s" in scope "%s".', key, scope),
                    HINT = 'Its result row is the stored response; return one row, or none.';
            END IF;
            resp := pg_catalog.to_jsonb(r);
        END IF;
        CLOSE cur;
    ELSE
        PERFORM _IDEM_SCHEMA_.idem__execute_run(query, args, n, false);
    END IF;

    /* the claim must still be there, as the claim left it */
    SELECT i.status, i.token INTO k
      FROM _IDEM_SCHEMA_.idempotency_keys i
     WHERE i.scope OPERATOR(pg_catalog.=) idem_execute.scope
       AND i.key OPERATOR(pg_catalog.=) idem_execute.key;
    row_found := FOUND;
    IF NOT row_found OR k.status OPERATOR(pg_catalog.<>) 'processing' OR k.token OPERATOR(pg_catalog.<>) token THEN
        RAISE EXCEPTION USING ERRCODE = CASE WHEN row_found THEN 'IK003' ELSE 'IK004' END,
            MESSAGE = pg_catalog.format('the statement given to idem_execute %s its own idempotency key',
                                        CASE WHEN row_found THEN 'changed' ELSE 'deleted' END),
            DETAIL = pg_catalog.format('Key "%s" in scope "%s".', key, scope),
            HINT = 'The statement must not write the idempotency_keys row of the key it runs under.';
    END IF;
    PERFORM _IDEM_SCHEMA_.idem_complete(key, success_code, resp, scope, token);
    status := 'completed';
    response_code := success_code;
    response := resp;
    retry_after := NULL;
END
$idem_execute$;
COMMENT ON FUNCTION _IDEM_SCHEMA_.idem_execute(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.anycompatiblearray) IS
    'Claims the key and, when new, runs the statement with the given arguments, stores its result row as the response and completes: one round trip';

CREATE FUNCTION _IDEM_SCHEMA_.idem_execute(
    key pg_catalog.text,
    request pg_catalog.jsonb,
    scope pg_catalog.text,
    success_code pg_catalog.int4,
    query pg_catalog.text,
    OUT outcome pg_catalog.text,
    OUT token pg_catalog.int8,
    OUT status _IDEM_SCHEMA_.idempotency_status,
    OUT response_code pg_catalog.int4,
    OUT response pg_catalog.jsonb,
    OUT retry_after pg_catalog.interval,
    OUT recovery_point pg_catalog.text)
RETURNS record
LANGUAGE sql VOLATILE
AS $idem_execute_noargs$
SELECT * FROM _IDEM_SCHEMA_.idem_execute(key, request, scope, success_code, query,
                                         VARIADIC NULL::pg_catalog.text[])
$idem_execute_noargs$;
COMMENT ON FUNCTION _IDEM_SCHEMA_.idem_execute(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.text) IS
    'Claims the key and, when new, runs the statement (no arguments), stores its result row as the response and completes: one round trip';
/* as privileges.sql grants the C build's two (whose VARIADIC is "any") */
REVOKE ALL ON FUNCTION _IDEM_SCHEMA_.idem_execute(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.anycompatiblearray) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _IDEM_SCHEMA_.idem_execute(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.anycompatiblearray) TO idempotency_app;
REVOKE ALL ON FUNCTION _IDEM_SCHEMA_.idem_execute(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _IDEM_SCHEMA_.idem_execute(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.text) TO idempotency_app;
$src$, '_IDEM_SCHEMA_', schema);
END
$idem_execute_install$;
