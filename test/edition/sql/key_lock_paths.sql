-- The SQL edition only: idem_claim takes a new key's lock itself in the
-- common case (edition/functions/idem_claim.sql) and through idem__lock_key
-- otherwise; both must take the lock idem__key_lock_id names, for every
-- kind of scope and key (non-ASCII, the longest scope, commas and spaces), so that
-- a claim by one way and a claim by the other exclude each other.
\set VERBOSITY terse
CREATE TEMP TABLE cases (n int, scope text, key text);
INSERT INTO cases VALUES (1, 'default', 'k1'), (2, '', 'k2'), (3, 'sc,ope', 'a key, with commas'),
    (4, 'scope', 'ключ-é-€-𝄞'), (5, repeat('s', 255), repeat('k', 248)), (6, 'default', ' ');
BEGIN;
-- the common call (one way), then a lease given (the other), keys told apart by the way
SELECT n, outcome FROM cases, LATERAL idem_claim(key || '/common', NULL, scope) ORDER BY n;
SELECT n, outcome FROM cases, LATERAL idem_claim(key || '/lease', NULL, scope, lease => '60 s') ORDER BY n;
-- the locks held, in the order taken, against the ids of the keys
SELECT (SELECT array_agg(idem__key_lock_id(scope, key || way) ORDER BY w, n)
          FROM cases, (VALUES (1, '/common'), (2, '/lease')) AS v(w, way))::text
       = '{' || current_setting('idempotency_edition.key_locks') || '}' AS the_ids_held;
SELECT count(*) AS advisory_locks_held
  FROM pg_locks l, cases, (VALUES ('/common'), ('/lease')) AS v(way)
 WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted
   AND ((l.classid::bigint << 32) | l.objid::bigint) = idem__key_lock_id(scope, key || way);
ROLLBACK;
