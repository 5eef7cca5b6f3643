-- Adversarial review, 2026-11-23: idem_execute checks the statement's kind
-- once, when it prepares and caches it.  A rule created afterwards on a
-- table the statement writes is picked up when the cached plan is
-- revalidated, and the rewritten statement (here DO INSTEAD NOTIFY, a
-- utility statement) runs without the check.  Wanted: 0A000 on the second
-- call, as for a statement prepared after the rule existed.
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
