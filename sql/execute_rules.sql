-- idem_execute's check of the statement's kind holds after a rule is
-- created on a table the statement writes.  The check runs when the
-- statement is prepared and cached; a rule created afterwards is picked up
-- when the cached plan is revalidated, and the rewritten statement (here DO
-- INSTEAD NOTIFY, a utility statement) must not run without the check.
-- Expected: 0A000 on the second call, as for a statement prepared after the
-- rule existed.
CREATE TABLE attack_rule_target (v int);
SELECT outcome FROM idem_execute('attack-rule-1', NULL, 'attack', 201,
    'INSERT INTO attack_rule_target VALUES (1)');
CREATE RULE attack_notify AS ON INSERT TO attack_rule_target DO INSTEAD NOTIFY attack_channel;
SELECT outcome FROM idem_execute('attack-rule-2', NULL, 'attack', 201,
    'INSERT INTO attack_rule_target VALUES (1)');
-- the same rewritten statement prepared afresh is refused
SELECT outcome FROM idem_execute('attack-rule-3', NULL, 'attack', 201,
    'INSERT INTO attack_rule_target VALUES (2)');
SELECT key, status FROM idempotency_keys WHERE scope = 'attack' ORDER BY key;
DELETE FROM idempotency_keys WHERE scope = 'attack';
DROP TABLE attack_rule_target;
