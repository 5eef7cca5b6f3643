/*
 * test/pgtap/bad_input.sql: odd requests and responses, and transitions
 * that cannot happen.
 *
 * 1. Every JSON kind at the top level (null, booleans, numbers, strings,
 *    arrays, objects, mixed) is a request and a response: a claim is new,
 *    the response is stored, the same request replays it equal (as jsonb
 *    and as text); every other kind, and SQL NULL (no request), under the
 *    same key is IK001.  Spellings of one document (key order, spacing,
 *    number notation) are one request.
 * 2. Depth and size: requests nested 1,000 and 10,000 deep, responses 16
 *    deep (over 8 kB, deeper is refused, 54000: each edition restores the
 *    other's rows), and 10 MB each way, round trip and replay equal; a
 *    one-byte or one-level difference is IK001.  (PostgreSQL's own jsonb input refuses
 *    100,000 levels with 54001 before the extension sees the value.)
 * 3. Impossible transitions: complete twice, complete after fail, fail
 *    after complete, fail twice, heartbeat / checkpoint / release of a
 *    finished key, a NULL token outside the claiming transaction, a wrong
 *    or stale token, a released or missing key, resolve of a finished or
 *    missing key.  Each raises its SQLSTATE (IK002 stale token, IK003 not
 *    processing, IK004 not found, IK005 token required) and the key's
 *    stored row (as text, every column) is the same afterwards.
 * 4. A batch answers with at most 256 MB of stored responses and recovery
 *    points (its rows are kept until its last key is claimed; recovery
 *    points: test/t/070_memory.pl): five claims of a key whose
 *    stored response is 60 MB (compressed to a few hundred kB; a response
 *    over 64 MB as jsonb is refused) are 54000, four are answered, as is
 *    each claim on its own.
 *
 * A processing claim "made by another transaction" is needed for IK005; a
 * pgTAP file is one transaction, so it is inserted directly, as a
 * committed claim of another session would look (see sqlstates.sql).
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
SELECT plan(90);

/* ---- helpers ---- */

/* The stored row of (scope, key) as text, every column, or 'no row' */
CREATE FUNCTION pg_temp.row_text(k text, s text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce((SELECT t::text FROM idempotency_keys t WHERE t.scope = s AND t.key = k), 'no row')
$$;

/* Two tests: stmt fails with code, and the row of (s, k) is unchanged */
CREATE FUNCTION pg_temp.refused(stmt text, code text, k text, s text, descr text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.row_text(k, s);
BEGIN
    RETURN NEXT throws_ok(stmt, code, NULL, descr || ': ' || code);
    RETURN NEXT is(pg_temp.row_text(k, s), before, descr || ': stored row unchanged');
END
$$;

CREATE TEMP TABLE kinds (n serial, j text);
INSERT INTO kinds (j) VALUES
    ('null'), ('true'), ('false'),
    ('0'), ('1'), ('-1.5'), ('1e300'), ('-1e-300'), ('123456789012345678901234567890.123456789'),
    ('""'), ('"text"'), ('"1"'), ('"null"'), ('"ünïcødé 支付 \n \"q\" \\"'), ('"\u00e9"'),
    ('[]'), ('{}'), ('[null]'), ('[[]]'), ('{"": null}'), ('{"a": []}'),
    ('[1, "a", null, true, {"b": [false, 2.5]}]'),
    ('{"order": "A1", "amount": 3000, "currency": "TWD", "items": [{"sku": "x", "qty": 2}]}');
CREATE TEMP TABLE kind_results (n int, first text, second text, same_response boolean, same_text boolean);

/* ==== 1. every JSON kind ==== */

DO $kinds$
DECLARE
    k record;
    r1 record;
    r2 record;
BEGIN
    FOR k IN SELECT * FROM kinds ORDER BY n LOOP
        SELECT * INTO r1 FROM idem_claim('kind-' || k.n, k.j::jsonb, 'bad');
        PERFORM idem_complete('kind-' || k.n, 200, k.j::jsonb, 'bad');
        SELECT * INTO r2 FROM idem_claim('kind-' || k.n, k.j::jsonb, 'bad');
        INSERT INTO kind_results VALUES (k.n, r1.outcome, r2.outcome,
                                         r2.response = k.j::jsonb, r2.response::text = k.j::jsonb::text);
    END LOOP;
END
$kinds$;

SELECT is((SELECT count(*) FROM kinds), 23::bigint, 'kinds under test');
SELECT is((SELECT array_agg(n ORDER BY n) FROM kind_results WHERE first <> 'new'), NULL,
          'a request of every JSON kind claims new');
SELECT is((SELECT array_agg(n ORDER BY n) FROM kind_results WHERE second <> 'replay'), NULL,
          'the same request of every kind replays');
SELECT is((SELECT array_agg(n ORDER BY n) FROM kind_results WHERE NOT same_response OR NOT same_text), NULL,
          'a response of every kind replays equal, as jsonb and as text');
SELECT is((SELECT response_code FROM idem_lookup('kind-1', 'bad')), 200, 'the response code is stored with it');
SELECT is((SELECT response FROM idem_lookup('kind-1', 'bad')), 'null'::jsonb,
          'a JSON null response is stored as JSON null, not SQL NULL');

/* Every other kind under the same key, and SQL NULL, is a different request */
CREATE TEMP TABLE mismatch_results (n int, m int, state text);
DO $mismatch$
DECLARE
    a record;
    b record;
BEGIN
    FOR a IN SELECT * FROM kinds LOOP
        FOR b IN SELECT * FROM kinds WHERE n <> a.n UNION ALL SELECT 0, NULL LOOP
            BEGIN
                PERFORM idem_claim('kind-' || a.n, b.j::jsonb, 'bad');
                INSERT INTO mismatch_results VALUES (a.n, b.n, 'no error');
            EXCEPTION WHEN OTHERS THEN
                INSERT INTO mismatch_results VALUES (a.n, b.n, SQLSTATE);
            END;
        END LOOP;
    END LOOP;
END
$mismatch$;
SELECT is((SELECT count(*) FROM mismatch_results), 23::bigint * 23, 'every pair of kinds, plus SQL NULL, tried');
SELECT is((SELECT array_agg(DISTINCT state) FROM mismatch_results), ARRAY['IK001'],
          'another kind under the same key, or no request at all, is always IK001');
SELECT is((SELECT state FROM mismatch_results WHERE n = 1 AND m = 0), 'IK001',
          'JSON null and SQL NULL (no request) are different requests');
SELECT is((SELECT state FROM mismatch_results r JOIN kinds a ON a.n = r.n JOIN kinds b ON b.n = r.m
           WHERE a.j = '1' AND b.j = '"1"'), 'IK001', 'the number 1 and the string "1" are different requests');

/* Spellings of one document are one request */
SELECT is((SELECT array_agg(a || ' / ' || b) FROM (VALUES
               ('0', '-0'), ('1', '1.0'), ('1', '1e0'), ('1', '0.1e1'), ('-1.5', '-15e-1'),
               ('{"a": 1, "b": [1, 2]}', '{"b":[1,2],"a":1}'), ('{"a": 1, "a": 2}', '{"a": 2}'),
               ('"é"', '"\u00e9"'), ('[1, 2]', '[ 1 ,2 ]')) AS t(a, b)
           WHERE idem_request_hash(a::jsonb) <> idem_request_hash(b::jsonb)), NULL,
          'key order, spacing, escapes, duplicate keys and number notation do not change the request hash');
SELECT is((SELECT outcome FROM idem_claim('kind-23', '{"items":[{"qty":2.0,"sku":"x"}],"currency":"TWD","amount":3.0e3,"order":"A1"}', 'bad')),
          'replay', 'a respelled request replays');

/* ==== 2. depth and size ==== */

SELECT (repeat('[', 1000) || '1' || repeat(']', 1000)) AS deep_array,
       (repeat('{"a": ', 1000) || '"x"' || repeat('}', 1000)) AS deep_object,
       (repeat('[', 999) || '1' || repeat(']', 999)) AS less_deep,
       (repeat('{"k": [', 5000) || 'null' || repeat(']}', 5000)) AS deeper,
       (repeat('{"a": ', 15) || to_jsonb(repeat('x', 9000))::text || repeat('}', 15)) AS deep_16 \gset

SELECT is((SELECT outcome FROM idem_claim('deep-array', :'deep_array'::jsonb, 'bad')), 'new',
          'a request nested 1,000 arrays deep claims new');
SELECT throws_ok(format('SELECT idem_complete(%L, 200, %L::jsonb, %L)', 'deep-array', :'deep_object', 'bad'),
                 '54000', NULL,
                 'a response over 8 kB nested 1,000 objects deep is refused (54000): each edition restores the other''s rows');
SELECT lives_ok(format('SELECT idem_complete(%L, 200, %L::jsonb, %L)', 'deep-array', :'deep_16', 'bad'),
                'a response over 8 kB nested 16 deep is stored');
SELECT is((SELECT outcome || ' ' || (response = :'deep_16'::jsonb)::text
           FROM idem_claim('deep-array', :'deep_array'::jsonb, 'bad')),
          'replay true', 'the deep request replays the deep response, equal');
SELECT throws_ok(format('SELECT idem_claim(%L, %L::jsonb, %L)', 'deep-array', :'less_deep', 'bad'), 'IK001', NULL,
                 'one level less is a different request');
SELECT is((SELECT outcome FROM idem_claim('deeper', :'deeper'::jsonb, 'bad')), 'new',
          'a request nested 10,000 deep (objects and arrays) claims new');
SELECT throws_ok(format('SELECT idem_complete(%L, 200, %L::jsonb, %L)', 'deeper', :'deeper', 'bad'),
                 '54000', NULL, 'a response nested 10,000 deep is refused (54000), not the stack''s 54001');
SELECT lives_ok(format('SELECT idem_complete(%L, 200, %L::jsonb, %L)', 'deeper', :'deep_16', 'bad'),
                'the key is completed with another response');
SELECT is((SELECT outcome || ' ' || (response::text = :'deep_16'::jsonb::text)::text
           FROM idem_claim('deeper', :'deeper'::jsonb, 'bad')),
          'replay true', 'and replays equal');
SELECT throws_ok($$SELECT idem_claim('deepest', (repeat('[', 100000) || ']' || repeat(']', 99999))::jsonb, 'bad')$$,
                 '54001', NULL, 'PostgreSQL''s jsonb input refuses 100,000 levels (stack depth) before the extension sees it');

SELECT is((SELECT outcome FROM idem_claim('huge', jsonb_build_object('blob', repeat('x', 10485760)), 'bad')), 'new',
          'a 10 MB request claims new');
SELECT lives_ok($$SELECT idem_complete('huge', 201, jsonb_build_object('echo', repeat('y', 10485760), 'n', 1), 'bad')$$,
                'a 10 MB response is stored');
SELECT is((SELECT outcome || ' ' || response_code || ' ' || length(response ->> 'echo') || ' ' ||
                  (response = jsonb_build_object('echo', repeat('y', 10485760), 'n', 1))::text
           FROM idem_claim('huge', jsonb_build_object('blob', repeat('x', 10485760)), 'bad')),
          'replay 201 10485760 true', 'the 10 MB request replays the 10 MB response, equal');
SELECT is((SELECT md5(response::text) FROM idem_lookup('huge', 'bad')),
          md5(jsonb_build_object('echo', repeat('y', 10485760), 'n', 1)::text),
          'the stored 10 MB response is byte for byte the one given (md5 of its text)');
SELECT throws_ok($$SELECT idem_claim('huge', jsonb_build_object('blob', repeat('x', 10485759) || 'z'), 'bad')$$,
                 'IK001', NULL, 'the last byte of a 10 MB request differing is a different request');
SELECT is((SELECT outcome FROM idem_claim('wide', (SELECT jsonb_object_agg('k' || i, i) FROM generate_series(1, 100000) i),
                                           'bad')), 'new', 'a request of 100,000 members claims new');
SELECT lives_ok($$SELECT idem_complete('wide', 200, NULL, 'bad')$$, 'and completes');
SELECT is((SELECT outcome FROM idem_claim('wide', (SELECT jsonb_object_agg('k' || i, i ORDER BY i DESC)
                                                   FROM generate_series(1, 100000) i), 'bad')),
          'replay', 'the same members built in another order replay');

/* ==== 3. impossible transitions ==== */

/* t-done: completed in this transaction */
SELECT is((SELECT outcome FROM idem_claim('t-done', '{"p": 1}', 'bad')), 'new', 'fixture: t-done claimed');
SELECT lives_ok($$SELECT idem_complete('t-done', 201, '{"paid": true}', 'bad')$$, 'fixture: t-done completed');
SELECT token AS done_token FROM idempotency_keys WHERE scope = 'bad' AND key = 't-done' \gset

SELECT * FROM pg_temp.refused($$SELECT idem_complete('t-done', 200, '{"again": true}', 'bad')$$,
                              'IK003', 't-done', 'bad', 'complete twice');
SELECT * FROM pg_temp.refused(format($$SELECT idem_complete('t-done', 200, '{"again": true}', 'bad', %s)$$, :done_token),
                              'IK003', 't-done', 'bad', 'complete twice, with the right token');
SELECT * FROM pg_temp.refused($$SELECT idem_fail('t-done', 'bad', NULL, 500, '{"late": true}', false)$$,
                              'IK003', 't-done', 'bad', 'fail after complete');
SELECT * FROM pg_temp.refused($$SELECT idem_heartbeat('t-done', 'bad')$$,
                              'IK003', 't-done', 'bad', 'heartbeat on a completed key');
SELECT * FROM pg_temp.refused($$SELECT idem_checkpoint('t-done', 'later', 'bad')$$,
                              'IK003', 't-done', 'bad', 'checkpoint after complete');
SELECT * FROM pg_temp.refused($$SELECT idem_release('t-done', 'bad')$$,
                              'IK003', 't-done', 'bad', 'release of a completed key');
SELECT * FROM pg_temp.refused(format($$SELECT idem_complete('t-done', 200, NULL, 'bad', %s)$$, :done_token + 1000),
                              'IK002', 't-done', 'bad', 'complete of a completed key with a wrong token');
SELECT * FROM pg_temp.refused($$SELECT idem_resolve('t-done', 'bad', 'fail', 500, '{}')$$,
                              'IK003', 't-done', 'bad', 'resolve of a completed key');
SELECT * FROM pg_temp.refused($$SELECT idem_claim('t-done', '{"p": 2}', 'bad')$$,
                              'IK001', 't-done', 'bad', 'claim of a completed key with another request');

/* t-failed: failed, retryable; t-final: failed, not retryable */
SELECT lives_ok($$SELECT idem_claim('t-failed', NULL, 'bad'), idem_claim('t-final', NULL, 'bad')$$,
                'fixture: t-failed and t-final claimed');
SELECT lives_ok($$SELECT idem_fail('t-failed', 'bad', NULL, 503, '{"retry": true}')$$, 'fixture: t-failed failed (retryable)');
SELECT lives_ok($$SELECT idem_fail('t-final', 'bad', NULL, 402, '{"declined": true}', false)$$,
                'fixture: t-final failed (not retryable)');
SELECT * FROM pg_temp.refused($$SELECT idem_complete('t-failed', 200, '{}', 'bad')$$,
                              'IK003', 't-failed', 'bad', 'complete after fail');
SELECT * FROM pg_temp.refused($$SELECT idem_fail('t-failed', 'bad')$$,
                              'IK003', 't-failed', 'bad', 'fail twice');
SELECT * FROM pg_temp.refused($$SELECT idem_heartbeat('t-failed', 'bad')$$,
                              'IK003', 't-failed', 'bad', 'heartbeat on a failed key');
SELECT * FROM pg_temp.refused($$SELECT idem_complete('t-final', 200, '{}', 'bad')$$,
                              'IK003', 't-final', 'bad', 'complete after a final failure');

/* t-foreign: processing, claimed by another transaction (inserted directly) */
SELECT nextval('idempotency_token_seq') AS foreign_token \gset
INSERT INTO idempotency_keys (scope, key, status, token, locked_until, created_at, updated_at, expires_at, request_hash)
VALUES ('bad', 't-foreign', 'processing', :foreign_token, now() + interval '1 hour', now(), now(),
        now() + interval '1 day', idem_request_hash('{"f": 1}'::jsonb));
SELECT * FROM pg_temp.refused($$SELECT idem_release('t-foreign', 'bad')$$,
                              'IK005', 't-foreign', 'bad', 'release without the token');
SELECT * FROM pg_temp.refused($$SELECT idem_complete('t-foreign', 200, '{}', 'bad')$$,
                              'IK005', 't-foreign', 'bad', 'complete without the token');
SELECT * FROM pg_temp.refused($$SELECT idem_fail('t-foreign', 'bad')$$,
                              'IK005', 't-foreign', 'bad', 'fail without the token');
SELECT * FROM pg_temp.refused($$SELECT idem_heartbeat('t-foreign', 'bad')$$,
                              'IK005', 't-foreign', 'bad', 'heartbeat without the token');
SELECT * FROM pg_temp.refused($$SELECT idem_checkpoint('t-foreign', 'p', 'bad')$$,
                              'IK005', 't-foreign', 'bad', 'checkpoint without the token');
SELECT * FROM pg_temp.refused(format($$SELECT idem_release('t-foreign', 'bad', %s)$$, :foreign_token + 1),
                              'IK002', 't-foreign', 'bad', 'release with a wrong token');

/* t-taken: the lease ran out and the key was claimed again; the first holder is stale */
SELECT token AS old_token FROM idem_claim('t-taken', NULL, 'bad', lease => '1 ms') \gset
SELECT pg_sleep(0.02) \g /dev/null
SELECT is((SELECT outcome FROM idem_claim('t-taken', NULL, 'bad')), 'reclaimed', 'fixture: t-taken taken over');
SELECT * FROM pg_temp.refused(format($$SELECT idem_complete('t-taken', 200, '{}', 'bad', %s)$$, :old_token),
                              'IK002', 't-taken', 'bad', 'complete with a stale token');
SELECT * FROM pg_temp.refused(format($$SELECT idem_heartbeat('t-taken', 'bad', %s)$$, :old_token),
                              'IK002', 't-taken', 'bad', 'heartbeat with a stale token');
SELECT * FROM pg_temp.refused(format($$SELECT idem_release('t-taken', 'bad', %s)$$, :old_token),
                              'IK002', 't-taken', 'bad', 'release with a stale token');

/* t-gone: released; and a key that never existed */
SELECT token AS gone_token FROM idem_claim('t-gone', NULL, 'bad') \gset
SELECT lives_ok($$SELECT idem_release('t-gone', 'bad')$$, 'fixture: t-gone released');
SELECT * FROM pg_temp.refused(format($$SELECT idem_complete('t-gone', 200, '{}', 'bad', %s)$$, :gone_token),
                              'IK004', 't-gone', 'bad', 'complete after release');
SELECT * FROM pg_temp.refused($$SELECT idem_heartbeat('never', 'bad', 1)$$,
                              'IK004', 'never', 'bad', 'heartbeat of a missing key');
SELECT * FROM pg_temp.refused($$SELECT idem_resolve('never', 'bad', 'release')$$,
                              'IK004', 'never', 'bad', 'resolve of a missing key');

/* 4. a batch's answers: at most 256 MB of stored responses */
SELECT token AS big_token FROM idem_claim('t-big', NULL, 'bad') \gset
SELECT lives_ok(format($$SELECT idem_complete('t-big', 200, jsonb_build_object('body', repeat('a', 60 * 1024 * 1024)), 'bad', %s)$$, :big_token),
                'fixture: t-big completed with a 60 MB response');
SELECT throws_ok($$SELECT count(*) FROM idem_claim_batch(array_fill('t-big'::text, ARRAY[5]), scope => 'bad')$$,
                 '54000', NULL, 'a batch answering 300 MB of stored responses is 54000');
SELECT is((SELECT count(*) FILTER (WHERE outcome = 'replay' AND length(response->>'body') = 60 * 1024 * 1024)
             FROM idem_claim_batch(array_fill('t-big'::text, ARRAY[4]), scope => 'bad')),
          4::bigint, 'a batch answering 240 MB of stored responses replays them all');

SELECT * FROM finish();
ROLLBACK;
