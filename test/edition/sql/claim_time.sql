-- The SQL edition only: idem_claim takes a round's time after it hashes the
-- request, as the C build does (claim.c), so that a key that expires while
-- its request is being hashed is claimed anew, never replayed; both ways of
-- the edition's idem_claim (the common call's one query, and the way for
-- any other call: here a lease given).  The edition's hash of a large
-- request takes long enough to see it (the C build's is too quick): the
-- key is made to expire a quarter of that hash's time after the call
-- starts, so it is replayed if the time is taken before the hash.
\set VERBOSITY terse
CREATE TEMP TABLE big AS
SELECT jsonb_agg(jsonb_build_object('n', i, 's', repeat('x', 20))) AS r FROM generate_series(1, 40000) i;
CREATE TEMP TABLE seen (way text, outcome text);
CREATE FUNCTION pg_temp.claim_while_expiring(way text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    req jsonb := (SELECT r FROM big);
    t0 timestamptz;
    d interval;
    tok bigint;
BEGIN
    SELECT token INTO tok FROM idem_claim('slow', req, 'time');
    PERFORM idem_complete('slow', 200, '{}', 'time', tok);
    -- the hash's time, the shorter of two
    t0 := clock_timestamp();
    PERFORM idem_request_hash(req);
    d := clock_timestamp() - t0;
    t0 := clock_timestamp();
    PERFORM idem_request_hash(req);
    d := LEAST(d, clock_timestamp() - t0);
    UPDATE idempotency_keys SET expires_at = clock_timestamp() + d / 4, due_at = clock_timestamp() + d / 4
     WHERE scope = 'time' AND key = 'slow';
    IF way = 'one query' THEN
        INSERT INTO seen SELECT way, outcome FROM idem_claim('slow', req, 'time');
    ELSE
        INSERT INTO seen SELECT way, outcome FROM idem_claim('slow', req, 'time', lease => '60 s');
    END IF;
    DELETE FROM idempotency_keys WHERE scope = 'time';
END $$;
SELECT pg_temp.claim_while_expiring('one query');
SELECT pg_temp.claim_while_expiring('the other way');
SELECT * FROM seen;
-- A row written before a wait moves forward by the seconds the wait took
-- (idem__restamp, as the C build's SHIFTED): not by days added in the
-- session's TimeZone, which across a change of daylight saving are 23 or
-- 25 hours.  A row written 48 hours ago whose lease ends before Europe's
-- spring change (2026-03-29) moves by 48 hours exactly.
SET TimeZone = 'Europe/Berlin';
BEGIN;
SELECT token AS dst_token FROM idem_claim('dst', NULL, 'time') \gset
UPDATE idempotency_keys
   SET updated_at = clock_timestamp() - interval '48 hours', created_at = clock_timestamp() - interval '48 hours',
       locked_until = '2026-03-28 12:00 Europe/Berlin', expires_at = '2026-03-28 13:00 Europe/Berlin',
       due_at = '2026-03-28 12:00 Europe/Berlin'
 WHERE scope = 'time' AND key = 'dst';
SELECT idem__restamp('time', ARRAY['dst'], ARRAY[:dst_token]::bigint[], 'epoch') AS moved;
SELECT round(extract(epoch FROM locked_until - '2026-03-28 12:00 Europe/Berlin'::timestamptz) / 3600) AS lease_hours,
       round(extract(epoch FROM expires_at - '2026-03-28 13:00 Europe/Berlin'::timestamptz) / 3600) AS expiry_hours,
       round(extract(epoch FROM due_at - '2026-03-28 12:00 Europe/Berlin'::timestamptz) / 3600) AS due_hours
  FROM idempotency_keys WHERE scope = 'time' AND key = 'dst';
ROLLBACK;
RESET TimeZone;
