-- The SQL edition only (test/edition/sql/): its integer settings are
-- placeholders, so a value the C build refuses at SET is refused by the call
-- that reads it, 22023 with the C build's own message and hint (guc.c's
-- parse_int: "invalid value", a unit this setting does not take, "Value
-- exceeds integer range." after units, "outside the valid range"). Every
-- reader of every integer setting, each bad kind of value; then the path a
-- service takes, a claim.
\set SHOW_CONTEXT never
SET IntervalStyle = postgres;
CREATE FUNCTION pg_temp.read_as(setting text, value text, reader text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st text; msg text; hint text; got text;
BEGIN
    PERFORM set_config(setting, value, true);
    EXECUTE format('SELECT %s()::text', reader) INTO got;
    RETURN 'ok ' || got;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN st || ' ' || msg || CASE WHEN hint <> '' THEN ' / ' || hint ELSE '' END;
END
$$;
SELECT s.setting, v.value, pg_temp.read_as(s.setting, v.value, s.reader) AS read
  FROM (VALUES ('idempotency.lease', 'idem__lease'),
               ('idempotency.retention', 'idem__retention'),
               ('idempotency.max_attempts', 'idem__max_attempts'),
               ('idempotency.await_result', 'idem__await_result'),
               ('idempotency.max_key_length', 'idem__max_key_length')) AS s(setting, reader),
       (VALUES ('x'), ('5 parsecs'), ('5min'), ('1e10'), ('1e1000000'), ('-1e1000000'),
               ('-1'), ('2.6'), ('2.5'), ('1e400'), ('1e-400'), ('2500ms'), (' 7 '),
               -- strtol's bases, strtod's forms, units and what follows them,
               -- the next smaller unit's rounding (guc.c's parse_int and
               -- convert_to_base_unit; all compared with the C build's SET)
               ('010'), ('08'), ('0x3C'), ('0x'), ('-.5'), (' .5'), ('.5'), ('1.5e'),
               ('5 min'), ('5min5'), ('5 min x'), ('1_000'), ('0.0015h'), ('1.01h'),
               ('0.01d'), ('0.001MB'), ('30.1GB'), ('99999999999999999999'), ('inf')) AS v(value)
 ORDER BY s.setting, v.value;
-- hostile lengths: 140,000 digits, and as many after the point (the C
-- build reads 93 s for the second)
SELECT left(pg_temp.read_as('idempotency.lease', repeat('9', 140000), 'idem__lease'), 60) AS digits,
       pg_temp.read_as('idempotency.lease', '1.' || repeat('5', 140000) || 'min', 'idem__lease') AS fraction;
-- a claim reads them: the same error, and nothing written
BEGIN;
SET LOCAL idempotency.max_attempts = 'x';
SELECT outcome FROM idem_claim('values-1', scope => 'values');
ROLLBACK;
BEGIN;
SET LOCAL idempotency.lease = '1e1000000';
SELECT outcome FROM idem_claim('values-1', scope => 'values');
ROLLBACK;
SELECT count(*) AS written FROM idempotency_keys WHERE scope = 'values';
