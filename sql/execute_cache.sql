-- idem_execute keeps the statements it has checked, the 16 most recent per
-- session: the C build as prepared statements, the SQL edition as their
-- digests.  A replay of one it keeps is answered without checking it again
-- (the statement does not run); one it does not keep is checked first, as
-- a statement that runs always is.
\set VERBOSITY terse
\c
CREATE TABLE cache_pay (id int);
SELECT outcome FROM idem_execute('c1', '{"n": 1}', 'cache', 201, 'INSERT INTO cache_pay VALUES (1) RETURNING id');
-- 15 more statements checked: 16 kept
SELECT outcome, count(*) FROM (
    SELECT (idem_execute('d' || i, '{}', 'cache', 201, format('INSERT INTO cache_pay VALUES (%s) RETURNING id', 100 + i))).outcome
    FROM generate_series(1, 15) i) s
GROUP BY outcome;
ALTER TABLE cache_pay RENAME TO cache_pay_moved;
-- kept: the replay is answered
SELECT outcome, response FROM idem_execute('c1', '{"n": 1}', 'cache', 201, 'INSERT INTO cache_pay VALUES (1) RETURNING id');
-- the same key with a statement not kept: checked first, refused
SELECT outcome FROM idem_execute('c1', '{"n": 1}', 'cache', 201, 'INSERT INTO cache_pay VALUES (2) RETURNING id');
-- a new key with a kept statement that no longer plans: refused, nothing stored
SELECT outcome FROM idem_execute('c2', '{"n": 2}', 'cache', 201, 'INSERT INTO cache_pay VALUES (1) RETURNING id');
SELECT count(*) AS c2_rows FROM idempotency_keys WHERE scope = 'cache' AND key = 'c2';
-- a different request for a kept statement: the request check answers
SELECT outcome FROM idem_execute('c1', '{"n": 9}', 'cache', 201, 'INSERT INTO cache_pay VALUES (1) RETURNING id');
-- one statement more pushes out the oldest: its replay is checked again, and refused
ALTER TABLE cache_pay_moved RENAME TO cache_pay;
SELECT outcome FROM idem_execute('e1', '{}', 'cache', 201, 'INSERT INTO cache_pay VALUES (300) RETURNING id');
ALTER TABLE cache_pay RENAME TO cache_pay_moved;
SELECT outcome FROM idem_execute('c1', '{"n": 1}', 'cache', 201, 'INSERT INTO cache_pay VALUES (1) RETURNING id');
-- the next oldest is still kept
SELECT outcome FROM idem_execute('d1', '{}', 'cache', 201, 'INSERT INTO cache_pay VALUES (101) RETURNING id');
-- the same text with an argument is another statement (the number and type of its arguments are kept with it)
SELECT outcome FROM idem_execute('d1', '{}', 'cache', 201, 'INSERT INTO cache_pay VALUES (101) RETURNING id', 1);
-- a new session keeps none
\c
SELECT outcome FROM idem_execute('d2', '{}', 'cache', 201, 'INSERT INTO cache_pay VALUES (102) RETURNING id');
ALTER TABLE cache_pay_moved RENAME TO cache_pay;
SELECT outcome, response FROM idem_execute('c1', '{"n": 1}', 'cache', 201, 'INSERT INTO cache_pay VALUES (1) RETURNING id');
SELECT count(*) AS payments FROM cache_pay;
DROP TABLE cache_pay;
-- a rule that makes a kept statement another kind: refused when it is to
-- run (the C build revalidates the plan; the edition checks a kept
-- statement again when the database has such a rule), its replays answered
CREATE TABLE cache_rule (id int);
SELECT outcome, response FROM idem_execute('r1', '{}', 'cache', 201, 'INSERT INTO cache_rule VALUES (1)');
CREATE RULE cache_rule_notify AS ON INSERT TO cache_rule DO INSTEAD NOTIFY cache_rule_chan;
SELECT outcome FROM idem_execute('r2', '{}', 'cache', 201, 'INSERT INTO cache_rule VALUES (1)');
SELECT count(*) AS r2_rows FROM idempotency_keys WHERE scope = 'cache' AND key = 'r2';
SELECT outcome FROM idem_execute('r1', '{}', 'cache', 201, 'INSERT INTO cache_rule VALUES (1)');
DROP TABLE cache_rule;
