/*
 * A hostile search_path cannot hijack the extension.  An attacker's schema,
 * put before pg_catalog, holds a table idempotency_keys and look-alikes of
 * the operators and functions the C code's SQL uses (=, <>, <=, +, -,
 * nextval, now, to_jsonb); a temporary table idempotency_keys shadows the
 * real one for unqualified names.  Every call still reaches the real table
 * and pg_catalog's operators: the hostile objects are never called.
 */
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SELECT plan(7);

CREATE SCHEMA hostile;
CREATE TABLE hostile.calls (what text);
GRANT ALL ON SCHEMA hostile TO PUBLIC;
GRANT ALL ON hostile.calls TO PUBLIC;
CREATE TABLE hostile.idempotency_keys (LIKE public.idempotency_keys);
CREATE TEMP TABLE idempotency_keys (LIKE public.idempotency_keys);

CREATE FUNCTION hostile.text_eq(text, text) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES ('text ='); SELECT $1 OPERATOR(pg_catalog.=) $2 $$;
CREATE OPERATOR hostile.= (LEFTARG = text, RIGHTARG = text, FUNCTION = hostile.text_eq);
CREATE FUNCTION hostile.int8_eq(bigint, bigint) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES ('bigint ='); SELECT $1 OPERATOR(pg_catalog.=) $2 $$;
CREATE OPERATOR hostile.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = hostile.int8_eq);
CREATE FUNCTION hostile.ts_le(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES ('<='); SELECT true $$;
CREATE OPERATOR hostile.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = hostile.ts_le);
CREATE FUNCTION hostile.ts_pl(timestamptz, interval) RETURNS timestamptz LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES ('+'); SELECT 'epoch'::timestamptz $$;
CREATE OPERATOR hostile.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = hostile.ts_pl);
CREATE FUNCTION hostile.ts_mi(timestamptz, timestamptz) RETURNS interval LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES ('-'); SELECT '0'::interval $$;
CREATE OPERATOR hostile.- (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = hostile.ts_mi);
CREATE FUNCTION hostile.nextval(regclass) RETURNS bigint LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES ('nextval'); SELECT 1::bigint $$;
CREATE FUNCTION hostile.now() RETURNS timestamptz LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES ('now'); SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION hostile.to_jsonb(anyelement) RETURNS jsonb LANGUAGE sql AS
$$ INSERT INTO hostile.calls VALUES ('to_jsonb'); SELECT '{"hijacked": true}'::jsonb $$;

CREATE TABLE public.sec_payments (id serial PRIMARY KEY, amount int);

-- The caller's path puts the attacker first, even before pg_catalog.  The
-- calls run in a DO block: pgTAP's own functions would be hijacked too.
SET LOCAL search_path = hostile, pg_catalog, public;
DO $calls$
DECLARE
    t bigint;
BEGIN
    PERFORM idem_claim('sec-1', '{"a": 1}', 'sec');
    SELECT token INTO t FROM public.idempotency_keys
     WHERE key OPERATOR(pg_catalog.=) 'sec-1'::text;
    PERFORM idem_checkpoint('sec-1', 'p', 'sec', t);
    PERFORM idem_heartbeat('sec-1', 'sec', t);
    PERFORM idem_complete('sec-1', 201, '{"ok": true}', 'sec');
    PERFORM idem_lookup('sec-1', 'sec');
    PERFORM idem_claim('sec-1', '{"a": 1}', 'sec');
    PERFORM idem_execute('sec-2', NULL, 'sec', 201,
        'INSERT INTO public.sec_payments (amount) VALUES ($1) RETURNING amount', 5);
    PERFORM idem_claim('sec-3', NULL, 'sec', lease => '1 ms');
    PERFORM pg_catalog.pg_sleep(0.01);
    PERFORM idem_expire();
    PERFORM idem_claim('sec-3', NULL, 'sec');
END
$calls$;

SET LOCAL search_path = public, pg_catalog;

SELECT is((SELECT count(*) FROM hostile.calls), 0::bigint, 'no hostile operator or function was called');

-- control: unqualified SQL under that path does fall into the trap
SET LOCAL search_path = hostile, pg_catalog, public;
DO $control$ BEGIN PERFORM 'x'::text = 'x'::text, now(); END $control$;
SET LOCAL search_path = public, pg_catalog;
SELECT is((SELECT string_agg(what, ',' ORDER BY what) FROM hostile.calls), 'now,text =',
          'control: the same path hijacks unqualified = and now()');
SELECT is((SELECT count(*) FROM hostile.idempotency_keys), 0::bigint, 'nothing reached the hostile table');
SELECT is((SELECT count(*) FROM pg_temp.idempotency_keys), 0::bigint, 'nothing reached the temporary table');
SELECT is((SELECT status || ' ' || response::text || ' ' || recovery_point FROM public.idempotency_keys WHERE key = 'sec-1'),
          'completed {"ok": true} p', 'the real table has the completed key');
SELECT is((SELECT response FROM public.idempotency_keys WHERE key = 'sec-2'), '{"amount": 5}'::jsonb,
          'idem_execute stored its own to_jsonb of the result row');
SELECT is((SELECT token > 1 FROM public.idempotency_keys WHERE key = 'sec-3'), true,
          'idem_expire and the takeover used the real token sequence');

SELECT * FROM finish();
ROLLBACK;
