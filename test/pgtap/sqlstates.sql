/*
 * test/pgtap/sqlstates.sql: the error contract.
 *
 *   22004  null_value_not_allowed   NULL key, scope (or action)
 *   22023  invalid_parameter_value  empty or over-long key or scope, bad
 *                                   lease or await_result, unknown
 *                                   idem_resolve action
 *   IK001  request mismatch         same key, different request
 *   IK002  stale token              token is not the key's current token
 *   IK003  key not processing       e.g. completing a completed key
 *   IK004  key not found            no row for (scope, key)
 *   IK005  token required           NULL token outside the claiming transaction
 *
 * Every error case is checked four ways by pg_temp.error_ok: the SQLSTATE
 * (throws_ok); the key's stored row (idem_lookup) and the whole table are
 * the same after the failed call as before it (SPEC: "nothing already
 * stored is ever changed by a call that errors"); the primary message is in
 * PostgreSQL's style (not capitalised, no final period); and, when there is
 * a key to name, the DETAIL names it.
 *
 * IK005 needs a processing row that the current transaction did not claim.
 * A pgTAP file is one transaction, so the test inserts such a row directly,
 * with a token from the sequence, as another session's committed claim
 * would look; idem_claim was never called for it in this transaction.
 *
 * Run with pg_prove against a database where a superuser has done
 * CREATE EXTENSION pgtap; CREATE EXTENSION idempotency;
 */
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;

SELECT plan(194);

/* ---- helpers (temporary; gone with the ROLLBACK) ---- */

/* The key's row as idem_lookup returns it, or JSON null when there is none. */
CREATE FUNCTION pg_temp.key_row(k text, s text)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT COALESCE((SELECT to_jsonb(l) FROM idem_lookup(k, s) AS l), 'null'::jsonb)
$$;

/* Every stored row, in key order. */
CREATE FUNCTION pg_temp.all_rows()
RETURNS jsonb LANGUAGE sql AS $$
    SELECT COALESCE(jsonb_agg(to_jsonb(t) ORDER BY t.scope, t.key), '[]'::jsonb)
    FROM idempotency_keys AS t
$$;

/* Runs a statement and returns the fields of the error it raised (NULLs if none). */
CREATE FUNCTION pg_temp.error_of(stmt text,
                                 OUT err_state text, OUT err_message text,
                                 OUT err_detail text, OUT err_hint text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS err_state = RETURNED_SQLSTATE,
                            err_message = MESSAGE_TEXT,
                            err_detail = PG_EXCEPTION_DETAIL,
                            err_hint = PG_EXCEPTION_HINT;
END
$$;

/*
 * Four tests: stmt fails with code; key k in scope s and the whole table are
 * unchanged; the message follows the style guide; the detail names k (one
 * passing test instead when name_key is false: NULL, empty or over-long key).
 */
CREATE FUNCTION pg_temp.error_ok(stmt text, code text, k text, s text,
                                 descr text, name_key boolean DEFAULT true)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    row_before   jsonb := CASE WHEN name_key THEN pg_temp.key_row(k, s) END;
    table_before jsonb := pg_temp.all_rows();
    e            record;
BEGIN
    RETURN NEXT throws_ok(stmt, code, NULL, descr || ': SQLSTATE ' || code);
    RETURN NEXT ok(
        (CASE WHEN name_key THEN pg_temp.key_row(k, s) END) IS NOT DISTINCT FROM row_before
            AND pg_temp.all_rows() = table_before,
        descr || ': stored rows unchanged');
    SELECT * INTO e FROM pg_temp.error_of(stmt);
    RETURN NEXT ok(e.err_message IS NOT NULL AND e.err_message !~ '^[A-Z][a-z]' AND e.err_message !~ '\.$',
                   descr || ': message in PostgreSQL style');
    IF name_key THEN
        RETURN NEXT ok(strpos(COALESCE(e.err_detail, ''), k) > 0,
                       descr || ': detail names the key');
        IF strpos(COALESCE(e.err_detail, ''), k) = 0 THEN
            RETURN NEXT diag('detail was: ' || COALESCE(e.err_detail, '<none>'));
        END IF;
    ELSE
        RETURN NEXT pass(descr || ': (no key to name)');
    END IF;
    IF e.err_state IS DISTINCT FROM code THEN
        RETURN NEXT diag('message was: ' || COALESCE(e.err_message, '<none>'));
    END IF;
END
$$;

CREATE TEMP TABLE tap_tokens (k text PRIMARY KEY, token bigint NOT NULL);

/* ---- fixtures, all in scope 'tap-sql' ---- */

-- tap-done: claimed with a request and completed in this transaction
INSERT INTO tap_tokens
SELECT 'tap-done', token
FROM idem_claim('tap-done', request => '{"order": "A1", "amount": 3000, "currency": "TWD"}',
                scope => 'tap-sql');
SELECT lives_ok($$SELECT idem_complete('tap-done', 201, '{"payment_id": 981}', scope => 'tap-sql')$$,
                'fixture: tap-done claimed and completed');

-- tap-proc: claimed with a request in this transaction, still processing
INSERT INTO tap_tokens
SELECT 'tap-proc', token
FROM idem_claim('tap-proc', request => '{"order": "B2", "amount": 500}', scope => 'tap-sql');
SELECT is((SELECT status::text FROM idem_lookup('tap-proc', 'tap-sql')), 'processing',
          'fixture: tap-proc is processing');

-- tap-nohash: claimed without a request and completed
INSERT INTO tap_tokens
SELECT 'tap-nohash', token FROM idem_claim('tap-nohash', scope => 'tap-sql');
SELECT lives_ok($$SELECT idem_complete('tap-nohash', 200, '{"ok": true}', scope => 'tap-sql')$$,
                'fixture: tap-nohash claimed (no request) and completed');

-- tap-foreign: a processing claim this transaction did not make (see header)
INSERT INTO tap_tokens VALUES ('tap-foreign', nextval('idempotency_token_seq'));
INSERT INTO idempotency_keys (scope, key, status, token, locked_until,
                              created_at, updated_at, expires_at, request_hash)
SELECT 'tap-sql', 'tap-foreign', 'processing', t.token, now() + interval '1 hour',
       now(), now(), now() + interval '1 day',
       idem_request_hash('{"order": "C3"}'::jsonb)
FROM tap_tokens AS t WHERE t.k = 'tap-foreign';
SELECT is((SELECT token FROM idem_lookup('tap-foreign', 'tap-sql')),
          (SELECT token FROM tap_tokens WHERE k = 'tap-foreign'),
          'fixture: tap-foreign is another holder''s processing claim');

SELECT ok((SELECT token FROM tap_tokens WHERE k = 'tap-done') IS NOT NULL
          AND (SELECT token FROM tap_tokens WHERE k = 'tap-proc') IS NOT NULL
          AND (SELECT token FROM tap_tokens WHERE k = 'tap-nohash') IS NOT NULL,
          'fixture: every claim handed out a token');

/* ---- 22004: NULL key or scope ---- */

SELECT pg_temp.error_ok($$SELECT * FROM idem_claim(NULL)$$,
                        '22004', NULL, NULL, 'idem_claim NULL key', false);
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim(NULL, request => '{"a": 1}', scope => 'tap-sql')$$,
                        '22004', NULL, NULL, 'idem_claim NULL key with a request and scope', false);
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-nullscope', scope => NULL)$$,
                        '22004', 'tap-nullscope', 'tap-sql', 'idem_claim NULL scope');
SELECT pg_temp.error_ok($$SELECT idem_complete(NULL, 200, '{}', scope => 'tap-sql')$$,
                        '22004', NULL, NULL, 'idem_complete NULL key', false);
SELECT pg_temp.error_ok($$SELECT idem_resolve('tap-proc', 'tap-sql', NULL)$$,
                        '22004', 'tap-proc', 'tap-sql', 'idem_resolve NULL action');

/* ---- 22023: empty or over-long key or scope ---- */

SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('')$$,
                        '22023', '', '', 'idem_claim empty key', false);
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('', scope => 'tap-sql')$$,
                        '22023', '', 'tap-sql', 'idem_claim empty key in a scope', false);
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim(repeat('k', 256), scope => 'tap-sql')$$,
                        '22023', NULL, NULL, 'idem_claim key of 256 bytes (default limit 255)', false);
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim(repeat('é', 128), scope => 'tap-sql')$$,
                        '22023', NULL, NULL, 'idem_claim key of 128 characters but 256 bytes', false);
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-longscope', scope => repeat('s', 256))$$,
                        '22023', NULL, NULL, 'idem_claim scope of 256 bytes', false);

SELECT is((SELECT outcome FROM idem_claim(repeat('k', 255), scope => 'tap-sql')), 'new',
          'a key of exactly 255 bytes is accepted');
SELECT is((SELECT outcome FROM idem_claim(repeat('é', 127), scope => 'tap-sql')), 'new',
          'a key of 254 bytes in two-byte characters is accepted');
SELECT is((SELECT setting || ' ' || unit FROM pg_settings WHERE name = 'idempotency.max_key_length'),
          '255 B', 'idempotency.max_key_length defaults to 255 bytes');

SET LOCAL idempotency.max_key_length = 16;
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim(repeat('k', 17), scope => 'tap-sql')$$,
                        '22023', NULL, NULL, 'idem_claim key over a lowered idempotency.max_key_length', false);
SELECT is((SELECT outcome FROM idem_claim(repeat('m', 16), scope => 'tap-sql')), 'new',
          'a key at a lowered idempotency.max_key_length is accepted');
RESET idempotency.max_key_length;

/* A lease that is not positive is an invalid value. */
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-lease', scope => 'tap-sql', lease => '-1 second')$$,
                        '22023', 'tap-lease', 'tap-sql', 'idem_claim negative lease');

/* await_result: negative, or longer than an hour */
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-await', scope => 'tap-sql', await_result => '-1 second')$$,
                        '22023', 'tap-await', 'tap-sql', 'idem_claim negative await_result');
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-await', scope => 'tap-sql', await_result => '2 hours')$$,
                        '22023', 'tap-await', 'tap-sql', 'idem_claim await_result over an hour');

/* ---- IK001: same key, different request ---- */

SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-done', request => '{"order": "A1", "amount": 9999, "currency": "TWD"}', scope => 'tap-sql')$$,
                        'IK001', 'tap-done', 'tap-sql', 'claim of a completed key with a different request');
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-done', scope => 'tap-sql')$$,
                        'IK001', 'tap-done', 'tap-sql', 'claim of a completed key without the stored request');
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-nohash', request => '{"ok": true}', scope => 'tap-sql')$$,
                        'IK001', 'tap-nohash', 'tap-sql', 'claim with a request where none was stored');
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-proc', request => '{"order": "B2", "amount": 501}', scope => 'tap-sql')$$,
                        'IK001', 'tap-proc', 'tap-sql', 'claim of a processing key with a different request');
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-proc', request => '{"order": "B2", "amount": 501}', scope => 'tap-sql', wait => false)$$,
                        'IK001', 'tap-proc', 'tap-sql', 'claim (wait => false) of a processing key with a different request');
SELECT pg_temp.error_ok($$SELECT * FROM idem_claim('tap-foreign', request => '{"order": "C4"}', scope => 'tap-sql', wait => false)$$,
                        'IK001', 'tap-foreign', 'tap-sql', 'claim of another holder''s key with a different request');

-- not mismatches: the same JSON document, keys reordered and spaced differently
SELECT is((SELECT outcome FROM idem_claim('tap-done',
                 request => '{ "currency":"TWD","amount":3000,   "order":"A1" }', scope => 'tap-sql')),
          'replay', 'the same request with its keys reordered replays, no IK001');
SELECT is((SELECT response FROM idem_claim('tap-done',
                 request => '{"amount":3000,"currency":"TWD","order":"A1"}', scope => 'tap-sql')),
          '{"payment_id": 981}'::jsonb, 'the replay carries the stored response');
SELECT is((SELECT outcome FROM idem_claim('tap-nohash', scope => 'tap-sql')),
          'replay', 'no request given where none was stored replays');

/* ---- IK002: stale or wrong token ---- */

SELECT pg_temp.error_ok($$SELECT idem_complete('tap-proc', 201, '{"payment_id": 2}', scope => 'tap-sql',
                                              token => (SELECT token + 1000 FROM tap_tokens WHERE k = 'tap-proc'))$$,
                        'IK002', 'tap-proc', 'tap-sql', 'idem_complete with a wrong token');
SELECT pg_temp.error_ok($$SELECT idem_complete('tap-proc', 201, '{"payment_id": 2}', scope => 'tap-sql',
                                              token => (SELECT token - 1 FROM tap_tokens WHERE k = 'tap-proc'))$$,
                        'IK002', 'tap-proc', 'tap-sql', 'idem_complete with an older token');
SELECT pg_temp.error_ok($$SELECT idem_complete('tap-foreign', 201, '{"payment_id": 3}', scope => 'tap-sql',
                                              token => (SELECT token + 1 FROM tap_tokens WHERE k = 'tap-foreign'))$$,
                        'IK002', 'tap-foreign', 'tap-sql', 'idem_complete of another holder''s key with a wrong token');
SELECT pg_temp.error_ok($$SELECT idem_fail('tap-proc', scope => 'tap-sql',
                                          token => (SELECT token + 1000 FROM tap_tokens WHERE k = 'tap-proc'))$$,
                        'IK002', 'tap-proc', 'tap-sql', 'idem_fail with a wrong token');
SELECT pg_temp.error_ok($$SELECT idem_heartbeat('tap-proc', scope => 'tap-sql',
                                               token => (SELECT token + 1000 FROM tap_tokens WHERE k = 'tap-proc'))$$,
                        'IK002', 'tap-proc', 'tap-sql', 'idem_heartbeat with a wrong token');
SELECT pg_temp.error_ok($$SELECT idem_release('tap-proc', scope => 'tap-sql',
                                             token => (SELECT token + 1000 FROM tap_tokens WHERE k = 'tap-proc'))$$,
                        'IK002', 'tap-proc', 'tap-sql', 'idem_release with a wrong token');
SELECT pg_temp.error_ok($$SELECT idem_checkpoint('tap-proc', 'step-2', scope => 'tap-sql',
                                                token => (SELECT token + 1000 FROM tap_tokens WHERE k = 'tap-proc'))$$,
                        'IK002', 'tap-proc', 'tap-sql', 'idem_checkpoint with a wrong token');

/* ---- IK003: the key is not processing ---- */

SELECT pg_temp.error_ok($$SELECT idem_complete('tap-done', 201, '{"payment_id": 4}', scope => 'tap-sql')$$,
                        'IK003', 'tap-done', 'tap-sql', 'completing an already completed key (claiming transaction, NULL token)');
SELECT pg_temp.error_ok($$SELECT idem_complete('tap-done', 201, '{"payment_id": 4}', scope => 'tap-sql',
                                              token => (SELECT token FROM tap_tokens WHERE k = 'tap-done'))$$,
                        'IK003', 'tap-done', 'tap-sql', 'completing an already completed key with its own token');
SELECT pg_temp.error_ok($$SELECT idem_fail('tap-done', scope => 'tap-sql',
                                          token => (SELECT token FROM tap_tokens WHERE k = 'tap-done'))$$,
                        'IK003', 'tap-done', 'tap-sql', 'failing a completed key');
SELECT pg_temp.error_ok($$SELECT idem_heartbeat('tap-done', scope => 'tap-sql',
                                               token => (SELECT token FROM tap_tokens WHERE k = 'tap-done'))$$,
                        'IK003', 'tap-done', 'tap-sql', 'heartbeat on a completed key');

/* ---- IK004: no such key ---- */

SELECT pg_temp.error_ok($$SELECT idem_complete('tap-missing', 201, '{}', scope => 'tap-sql', token => 1)$$,
                        'IK004', 'tap-missing', 'tap-sql', 'completing a key that does not exist');
SELECT pg_temp.error_ok($$SELECT idem_complete('tap-missing', 201, '{}', scope => 'tap-sql')$$,
                        'IK004', 'tap-missing', 'tap-sql', 'completing a key that does not exist, NULL token');
SELECT pg_temp.error_ok($$SELECT idem_complete('tap-done', 201, '{}', scope => 'tap-other-scope',
                                              token => (SELECT token FROM tap_tokens WHERE k = 'tap-done'))$$,
                        'IK004', 'tap-done', 'tap-other-scope', 'completing a key of another scope');
SELECT pg_temp.error_ok($$SELECT idem_heartbeat('tap-missing', scope => 'tap-sql', token => 1)$$,
                        'IK004', 'tap-missing', 'tap-sql', 'heartbeat on a key that does not exist');

/* ---- IK005: NULL token outside the claiming transaction ---- */

SELECT pg_temp.error_ok($$SELECT idem_complete('tap-foreign', 201, '{"payment_id": 5}', scope => 'tap-sql')$$,
                        'IK005', 'tap-foreign', 'tap-sql', 'idem_complete of a claim made elsewhere without a token');
SELECT pg_temp.error_ok($$SELECT idem_complete('tap-foreign', 201, '{"payment_id": 5}', scope => 'tap-sql', token => NULL)$$,
                        'IK005', 'tap-foreign', 'tap-sql', 'idem_complete of a claim made elsewhere with token => NULL');
SELECT pg_temp.error_ok($$SELECT idem_fail('tap-foreign', scope => 'tap-sql')$$,
                        'IK005', 'tap-foreign', 'tap-sql', 'idem_fail of a claim made elsewhere without a token');
SELECT pg_temp.error_ok($$SELECT idem_heartbeat('tap-foreign', scope => 'tap-sql')$$,
                        'IK005', 'tap-foreign', 'tap-sql', 'idem_heartbeat of a claim made elsewhere without a token');
SELECT pg_temp.error_ok($$SELECT idem_release('tap-foreign', scope => 'tap-sql')$$,
                        'IK005', 'tap-foreign', 'tap-sql', 'idem_release of a claim made elsewhere without a token');
SELECT pg_temp.error_ok($$SELECT idem_checkpoint('tap-foreign', 'step-1', scope => 'tap-sql')$$,
                        'IK005', 'tap-foreign', 'tap-sql', 'idem_checkpoint of a claim made elsewhere without a token');

-- with its token the holder may record the result, once
SELECT lives_ok($$SELECT idem_complete('tap-foreign', 201, '{"payment_id": 5}', scope => 'tap-sql',
                                       token => (SELECT token FROM tap_tokens WHERE k = 'tap-foreign'))$$,
                'idem_complete of a claim made elsewhere succeeds with its token');
SELECT is((SELECT status::text || ' ' || response_code || ' ' || response::text
           FROM idem_lookup('tap-foreign', 'tap-sql')),
          'completed 201 {"payment_id": 5}', 'the holder''s result is stored');
SELECT pg_temp.error_ok($$SELECT idem_complete('tap-foreign', 201, '{"payment_id": 6}', scope => 'tap-sql',
                                              token => (SELECT token FROM tap_tokens WHERE k = 'tap-foreign'))$$,
                        'IK003', 'tap-foreign', 'tap-sql', 'a second idem_complete with the same token');

/* ---- idem_resolve: unknown action ---- */

SELECT pg_temp.error_ok($$SELECT idem_resolve('tap-proc', 'tap-sql', 'bogus')$$,
                        '22023', 'tap-proc', 'tap-sql', 'idem_resolve with action bogus');
SELECT pg_temp.error_ok($$SELECT idem_resolve('tap-proc', 'tap-sql', '')$$,
                        '22023', 'tap-proc', 'tap-sql', 'idem_resolve with an empty action');

/* ---- after all that, the fixtures are as they were ---- */

SELECT is((SELECT status::text || ' ' || response_code || ' ' || response::text
           FROM idem_lookup('tap-done', 'tap-sql')),
          'completed 201 {"payment_id": 981}', 'tap-done still holds its first response');
SELECT is((SELECT status::text || ' ' || token
           FROM idem_lookup('tap-proc', 'tap-sql')),
          'processing ' || (SELECT token FROM tap_tokens WHERE k = 'tap-proc'),
          'tap-proc is still processing under its first token');
SELECT lives_ok($$SELECT idem_complete('tap-proc', 201, '{"payment_id": 7}', scope => 'tap-sql')$$,
                'the claiming transaction can still complete tap-proc without a token');
SELECT is((SELECT count(*) FROM idempotency_keys WHERE scope = 'tap-other-scope'), 0::bigint,
          'nothing was written to the other scope');

SELECT * FROM finish();
ROLLBACK;
