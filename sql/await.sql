-- await_result: a claim that finds its key in flight waits, up to the time
-- given, for that claim to finish.  One session here: a claim committed in an
-- earlier transaction is another transaction's (test/specs/await*.spec has
-- two sessions, the holder finishing while the waiter waits).  Only lower
-- bounds of time are checked (a loaded server may be slow), and "did not
-- wait" as "statement_timeout did not cancel it".
\set SHOW_CONTEXT never
CREATE TABLE await_t (t0 timestamptz);

-- bad arguments: 22023, before anything is read
SELECT outcome FROM idem_claim('a-bad', NULL, 'await', await_result => '-1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_claim('a-bad', NULL, 'await', await_result => '61 min');
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_claim('a-bad', NULL, 'await', await_result => '1 mon');
\echo :LAST_ERROR_SQLSTATE
-- (the range error's wording differs between versions: its SQLSTATE only)
\set VERBOSITY sqlstate
SET idempotency.await_result = -1;
SET idempotency.await_result = '2h';
\set VERBOSITY default
SELECT count(*) AS rows_written FROM idempotency_keys WHERE scope = 'await';
-- 0 and NULL do not wait
SELECT outcome FROM idem_claim('a-zero', NULL, 'await', await_result => '0');
SELECT outcome FROM idem_claim('a-zero', NULL, 'await', await_result => '0');
SELECT outcome FROM idem_claim('a-zero', NULL, 'await', await_result => NULL);

-- a key nobody holds: new at once; a finished one: replay at once
SET statement_timeout = '20s';
SELECT outcome FROM idem_claim('a-new', '{"n": 1}', 'await', await_result => '1 h');
SELECT idem_complete('a-new', 201, '{"id": 1}', 'await', (SELECT token FROM idempotency_keys WHERE scope = 'await' AND key = 'a-new'));
SELECT outcome, response_code, response FROM idem_claim('a-new', '{"n": 1}', 'await', await_result => '1 h');
-- another request under a key in flight does not wait: IK001 at once
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', lease => '1 h');
SELECT outcome FROM idem_claim('a-held', '{"n": 2}', 'await', await_result => '1 h');
\echo :LAST_ERROR_SQLSTATE

-- in flight, nobody finishes it: in_progress when the time runs out, not before
INSERT INTO await_t VALUES (clock_timestamp());
SELECT outcome, retry_after > '50 min' AS retry_after_of_the_lease
FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '300 ms');
SELECT clock_timestamp() - max(t0) >= '300 ms' AS waited FROM await_t;
DELETE FROM await_t;

-- a claim its own transaction made: no wait (the wait would be for itself)
BEGIN;
SELECT outcome FROM idem_claim('a-own', NULL, 'await', lease => '1 h');
SELECT outcome FROM idem_claim('a-own', NULL, 'await', await_result => '1 h');
COMMIT;

-- a transaction that holds a key lock already, or has written: no wait (the
-- holder might be waiting for it, a cycle the deadlock detector cannot see)
BEGIN;
SELECT outcome FROM idem_claim('a-first', NULL, 'await');
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
ROLLBACK;
BEGIN;
INSERT INTO await_t VALUES (clock_timestamp());
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
ROLLBACK;

-- nor in a backend that holds any other lock a transaction may wait for:
-- an advisory lock, of the transaction or of the session, or a table locked
-- in a mode stronger than ROW EXCLUSIVE (the holder's complete might wait
-- for it, and the waiter would sleep until its time ran out)
BEGIN;
SELECT pg_advisory_xact_lock(7653);
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
ROLLBACK;
SELECT pg_advisory_lock(7653);
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
SELECT pg_advisory_unlock(7653);
BEGIN;
SELECT pg_advisory_xact_lock_shared(76, 53);
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
ROLLBACK;
BEGIN;
LOCK TABLE await_t IN SHARE MODE;
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
ROLLBACK;
-- the table locks of plain statements do not stop it
BEGIN;
LOCK TABLE await_t IN ROW EXCLUSIVE MODE;
SELECT count(*) FROM await_t;
SELECT clock_timestamp() AS t0 \gset
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '300 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= '300 ms' AS waited;
ROLLBACK;

-- REPEATABLE READ and SERIALIZABLE: the snapshot would never see the holder
-- finish, so no wait: in_progress at once
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
COMMIT;

-- statement_timeout (and so a cancel) ends the wait: 57014
SET statement_timeout = '200ms';
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '1 h');
\echo :LAST_ERROR_SQLSTATE
SET statement_timeout = '20s';

-- the lease runs out while it waits: the wait ends, the claim takes over,
-- with a lease counted from after the wait
SELECT outcome FROM idem_claim('a-lease', NULL, 'await', lease => '1 s');
SELECT outcome, token > 0 AS has_token FROM idem_claim('a-lease', NULL, 'await', lease => '1 min', await_result => '1 h');
SELECT locked_until > clock_timestamp() + interval '50 s' AS lease_after_wait
FROM idempotency_keys WHERE scope = 'await' AND key = 'a-lease';

-- idempotency.await_result: the default for idem_claim and idem_execute
SHOW idempotency.await_result;
SET idempotency.await_result = '250ms';
SHOW idempotency.await_result;
INSERT INTO await_t VALUES (clock_timestamp());
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await');
SELECT clock_timestamp() - max(t0) >= '250 ms' AS waited FROM await_t;
DELETE FROM await_t;
INSERT INTO await_t VALUES (clock_timestamp());
SELECT outcome, response FROM idem_execute('a-held', '{"n": 1}', 'await', 201, 'SELECT 1 AS one');
SELECT clock_timestamp() - max(t0) >= '250 ms' AS waited FROM await_t;
DELETE FROM await_t;
-- the argument wins over it, 0 too
SET idempotency.await_result = '1h';
SELECT outcome FROM idem_claim('a-held', '{"n": 1}', 'await', await_result => '0');
-- SET LOCAL, as a service sets it for one request
RESET idempotency.await_result;
BEGIN;
SET LOCAL idempotency.await_result = '1 s';
SHOW idempotency.await_result;
COMMIT;
SHOW idempotency.await_result;
RESET statement_timeout;
DROP TABLE await_t;
DELETE FROM idempotency_keys WHERE scope = 'await';
