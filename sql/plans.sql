-- The statements that find one key row by its key use the primary key,
-- never the due_at index (0.2.0 had a partial lease index that, with
-- statistics showing few processing rows, the planner scanned whole for
-- every complete).  Complete, fail, heartbeat and checkpoint are HOT
-- updates: they change no indexed column.  Checked through the statistics
-- counters, in a database of its own so that the table and its indexes
-- start empty, as in a new installation.
SELECT current_database() AS regress_db \gset
CREATE DATABASE idem_plans;
\c idem_plans
SET client_min_messages = warning;
CREATE EXTENSION idempotency;
CREATE VIEW plans_scans AS
    SELECT sum(idx_scan) FILTER (WHERE indexrelname = 'idempotency_keys_due_at_idx') AS due,
           sum(idx_scan) FILTER (WHERE indexrelname = 'idempotency_keys_pkey') AS pkey
    FROM pg_stat_user_indexes WHERE relname = 'idempotency_keys';
-- many completed rows, none processing, in the statistics
INSERT INTO idempotency_keys (scope, key, status, token, created_at, updated_at, expires_at, response_code, due_at)
SELECT 'plans-old', 'k' || i, 'completed', nextval('idempotency_token_seq'), now(), now(),
       now() + interval '1 day', 200, now() + interval '1 day'
FROM generate_series(1, 5000) i;
ANALYZE idempotency_keys;
-- generic plans, as a busy backend ends up using (the bad plan was generic)
SET plan_cache_mode = force_generic_plan;
SELECT pg_stat_force_next_flush();
SELECT due AS due_before, pkey AS pkey_before FROM plans_scans \gset
SELECT n_tup_upd AS upd_before, n_tup_hot_upd AS hot_before FROM pg_stat_user_tables
WHERE relname = 'idempotency_keys' \gset
-- every statement that takes a processing row by key
DO $$
DECLARE
    t bigint;
BEGIN
    FOR i IN 1..8 LOOP
        t := (idem_claim('c' || i, NULL, 'plans')).token;
        PERFORM idem_heartbeat('c' || i, 'plans', t);
        PERFORM idem_checkpoint('c' || i, 'step', 'plans', t);
        PERFORM idem_complete('c' || i, 201, '{}', 'plans', t);
        t := (idem_claim('f' || i, NULL, 'plans')).token;
        PERFORM idem_fail('f' || i, 'plans', t, 500);
        t := (idem_claim('r' || i, NULL, 'plans')).token;
        PERFORM idem_release('r' || i, 'plans', t);
        PERFORM idem_claim('s' || i, NULL, 'plans');
        PERFORM idem_resolve('s' || i, 'plans', 'fail', 500);
    END LOOP;
END $$;
SELECT pg_stat_force_next_flush();
SELECT due - :due_before AS due_index_scans, pkey - :pkey_before >= 40 AS primary_key_used
FROM plans_scans;
-- 8 each of heartbeat, checkpoint, complete, fail and resolve: HOT updates
-- (a call that slept past 10 ms, an I/O wait say, restamps its row: one
-- update more, not HOT, as it moves due_at, and its row version can take
-- the room on the page that a later update needed to be HOT; so at least
-- 35 of the 40, where none would be if they touched an indexed column)
SELECT n_tup_upd - :upd_before >= 40 AS updates, n_tup_hot_upd - :hot_before >= 35 AS hot_updates
FROM pg_stat_user_tables WHERE relname = 'idempotency_keys';
SELECT status, count(*) FROM idempotency_keys WHERE scope = 'plans' GROUP BY 1 ORDER BY 1;
\c :regress_db
DROP DATABASE idem_plans;
