-- complete, fail, heartbeat, checkpoint, release, resolve: the holder's and
-- the operator's calls, each error with its SQLSTATE, and nothing changed by a
-- call that errors.
\set SHOW_CONTEXT never

-- a committed claim, as in the cross-transaction pattern
SELECT token AS t FROM idem_claim('ext-1', '{"amount": 500}', 'm1') \gset
SELECT row_of('ext-1', 'm1') AS before \gset

-- outside the claiming transaction the token is required
SELECT idem_complete('ext-1', 200, '{}', 'm1');
\echo :LAST_ERROR_SQLSTATE
-- a wrong token is stale
SELECT idem_complete('ext-1', 200, '{}', 'm1', 999999999);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_heartbeat('ext-1', 'm1', 999999999);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_checkpoint('ext-1', 'x', 'm1', 999999999);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release('ext-1', 'm1', 999999999);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail('ext-1', 'm1', 999999999);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release('ext-1', 'm1');
\echo :LAST_ERROR_SQLSTATE
SELECT row_of('ext-1', 'm1') = :'before' AS unchanged;

-- heartbeat extends the lease and keeps the retention gap
SELECT locked_until AS old_until, expires_at - locked_until AS gap
FROM idempotency_keys WHERE key = 'ext-1' \gset
SELECT idem_heartbeat('ext-1', 'm1', :t, lease => '1 hour') > :'old_until' AS extended;
SELECT locked_until > now() + interval '59 minutes' AS one_hour,
       expires_at - locked_until = :'gap' AS same_gap
FROM idempotency_keys WHERE key = 'ext-1';

-- checkpoint records progress (NULL clears it)
SELECT idem_checkpoint('ext-1', 'step-1', 'm1', :t);
SELECT recovery_point FROM idempotency_keys WHERE key = 'ext-1';
SELECT idem_checkpoint('ext-1', NULL, 'm1', :t);
SELECT recovery_point IS NULL AS cleared FROM idempotency_keys WHERE key = 'ext-1';
SELECT idem_checkpoint('ext-1', 'step-2', 'm1', :t);

-- complete with the token: completed, response stored, lease cleared,
-- expires_at = now + retention (24h by default)
SELECT idem_complete('ext-1', 201, '{"id": 7}', 'm1', :t);
SELECT status, response_code, response, locked_until,
       expires_at BETWEEN now() + interval '23 hours' AND now() + interval '25 hours' AS retention_24h
FROM idempotency_keys WHERE key = 'ext-1';

-- nothing more may happen to a completed key
SELECT row_of('ext-1', 'm1') AS before \gset
SELECT idem_complete('ext-1', 200, '{"id": 8}', 'm1', :t);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail('ext-1', 'm1', :t);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_heartbeat('ext-1', 'm1', :t);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_checkpoint('ext-1', 'y', 'm1', :t);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_release('ext-1', 'm1', :t);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_resolve('ext-1', 'm1', 'release');
\echo :LAST_ERROR_SQLSTATE
SELECT row_of('ext-1', 'm1') = :'before' AS unchanged;

-- keys that do not exist
SELECT idem_complete('ghost', 200, '{}', 'm1', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('ghost', 200, '{}', 'm1');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_heartbeat('ghost', 'm1', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_resolve('ghost', 'm1', 'fail');
\echo :LAST_ERROR_SQLSTATE
-- another scope's key does not exist either
SELECT idem_complete('ext-1', 200, '{}', 'm2', :t);
\echo :LAST_ERROR_SQLSTATE

-- complete after fail is refused
BEGIN;
SELECT outcome FROM idem_claim('ff', NULL, 'm1');
SELECT idem_fail('ff', 'm1', retryable => false);
SELECT idem_complete('ff', 200, '{}', 'm1');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- release: the holder gives the key up and the next claim is new
SELECT token AS t2 FROM idem_claim('rel', NULL, 'm1') \gset
SELECT idem_release('rel', 'm1', :t2);
SELECT count(*) FROM idem_lookup('rel', 'm1');
SELECT outcome FROM idem_claim('rel', NULL, 'm1');

-- inside the claiming transaction the token may be left out; a savepoint
-- rolled back undoes the claim, and the token it returned no longer works
BEGIN;
SAVEPOINT s;
SELECT outcome FROM idem_claim('sp', NULL, 'm1');
ROLLBACK TO SAVEPOINT s;
SELECT idem_complete('sp', 200, '{}', 'm1');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- a savepoint released keeps the claim: the token may still be left out,
-- in the transaction and in a function's exception block (a subtransaction)
BEGIN;
SAVEPOINT s;
SELECT outcome FROM idem_claim('sp', NULL, 'm1');
RELEASE SAVEPOINT s;
SELECT idem_complete('sp', 200, '{"kept": 1}', 'm1');
DO $$
BEGIN
    BEGIN
        PERFORM idem_claim('sp-block', NULL, 'm1');
    EXCEPTION WHEN OTHERS THEN
        RAISE;
    END;
    PERFORM idem_complete('sp-block', 201, '{"kept": 2}', 'm1');
END
$$;
SELECT key, status, response_code, response FROM idempotency_keys
 WHERE scope = 'm1' AND key IN ('sp', 'sp-block') ORDER BY key;
ROLLBACK;
-- a savepoint rolled back after it claimed anew a key the transaction had
-- claimed before (released, or failed retryable, then claimed again): the
-- row is the earlier claim's again, and so is the token left out
BEGIN;
SELECT outcome FROM idem_claim('sp-again', NULL, 'm1');
SAVEPOINT s;
SELECT idem_release('sp-again', 'm1');
SELECT outcome FROM idem_claim('sp-again', NULL, 'm1');
ROLLBACK TO SAVEPOINT s;
SAVEPOINT s;
SELECT idem_fail('sp-again', 'm1');
SELECT outcome FROM idem_claim('sp-again', NULL, 'm1');
SAVEPOINT inner_s;
SELECT idem_checkpoint('sp-again', 'step', 'm1');
RELEASE SAVEPOINT inner_s;
ROLLBACK TO SAVEPOINT s;
SELECT idem_complete('sp-again', 200, '{"first": 1}', 'm1');
SELECT status, response FROM idem_lookup('sp-again', 'm1');
ROLLBACK;

-- NULL arguments
SELECT idem_complete(NULL, 200, '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_complete('x', 200, '{}', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail('rel', 'm1', NULL, NULL, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_resolve('rel', 'm1', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_resolve('rel', 'm1', 'delete');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_heartbeat('rel', 'm1', NULL, '0 s');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_heartbeat('rel', 'm1', NULL, '-1 year 360 days 1 sec');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_heartbeat('rel', 'm1', NULL, '200 years');
\echo :LAST_ERROR_SQLSTATE

-- resolve release: an operator frees a stuck key; its holder is fenced off
SELECT token AS t3 FROM idem_claim('stuck', NULL, 'm1') \gset
SELECT idem_resolve('stuck', 'm1', 'release');
SELECT idem_complete('stuck', 200, '{}', 'm1', :t3);
\echo :LAST_ERROR_SQLSTATE
SELECT outcome FROM idem_claim('stuck', NULL, 'm1');

-- lookup: the row, or no row
SELECT scope, key, status, response_code FROM idem_lookup('ext-1', 'm1');
SELECT count(*) FROM idem_lookup('ext-1', 'nope');

-- complete, fail and heartbeat keep the claim's retention to the microsecond
-- (their statements compute it in epoch seconds with IMMUTABLE functions, so
-- that Citus can route them; README "Scaling out")
BEGIN;
SELECT count(*) FROM generate_series(1, 500) i,
    idem_claim('exact-' || i, NULL, 'exact', lease => (i || ' ms')::interval,
               retention => ('1 day ' || (i * 1.000001) || ' sec')::interval);
SELECT count(*) FROM generate_series(1, 250) i, LATERAL (SELECT idem_complete('exact-' || i, 200, '{}', 'exact')) c;
SELECT count(*) FROM generate_series(251, 500) i, LATERAL (SELECT idem_heartbeat('exact-' || i, 'exact', NULL, ('1 hour ' || i || ' us')::interval)) c;
SELECT count(*) FILTER (WHERE expires_at = coalesce(locked_until, updated_at)
                                          + ('1 day ' || (substr(key, 7)::int * 1.000001) || ' sec')::interval) AS exact,
       count(*) AS keys
FROM idempotency_keys WHERE scope = 'exact';
ROLLBACK;
