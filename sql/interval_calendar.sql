-- Lease and retention given in calendar units never make a completed key
-- born expired.  Each is checked to be positive from the claim's time, but
-- the row's expires_at is (now + lease) + retention, and a completed key
-- keeps expires_at - locked_until.  Calendar arithmetic (months, and days
-- across a DST change in the session's TimeZone) can make a retention
-- positive from now but negative from now + lease, and the duplicate would
-- get "new" again (a second payment).
-- Whatever the date: every claim here is either refused (22023) or leaves a
-- completed key that is not expired yet.
CREATE FUNCTION attack_interval_try(k text, l interval, r interval) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM idem_claim(k, '{"amount": 1}', 'attack', lease => l, retention => r);
    PERFORM idem_complete(k, 201, '{"paid": 1}', 'attack');
EXCEPTION WHEN invalid_parameter_value THEN
    NULL;   -- refused: fine
END $$;
SET TimeZone = 'America/New_York';
-- months: now + n months lands in a shorter month than now's
SELECT count(attack_interval_try('mon-' || n || '-' || d, make_interval(months => n),
                                 make_interval(months => 1, days => -d)))
FROM generate_series(1, 24) n, generate_series(27, 30) d;
-- days: now + n days is the day before a DST change (a 23-hour day)
SELECT count(attack_interval_try('dst-' || n, make_interval(days => n),
                                 interval '1 day -23 hours -30 minutes'))
FROM generate_series(1, 400) n;
RESET TimeZone;
SELECT count(*) AS born_expired FROM idempotency_keys
WHERE scope = 'attack' AND status = 'completed' AND expires_at <= now();
-- and so a duplicate of a paid request must never be "new"
SELECT count(*) AS new_again FROM idempotency_keys k,
     LATERAL idem_claim(k.key, '{"amount": 1}', 'attack') c
WHERE k.scope = 'attack' AND k.status = 'completed' AND c.outcome = 'new';
DELETE FROM idempotency_keys WHERE scope = 'attack';
DROP FUNCTION attack_interval_try(text, interval, interval);
