-- test/citus/sql/upgrade_recipe_020.sql: the "Scaling out" recipe of the
-- 0.2.0 README (git show e537476:README.md), as a cluster that installed
-- 0.2.0 ran it: idempotency_keys distributed by scope with
-- create_distributed_table, co-located with payments, and the key
-- functions delegated with create_distributed_function (0.2.0 had no
-- idem_distribute).  For checks.sh's citus/upgrade, on the coordinator.
\set ON_ERROR_STOP 1
CREATE TABLE payments (
    merchant_id text NOT NULL,
    id bigserial,
    key text,
    amount int,
    PRIMARY KEY (merchant_id, id)
);
SELECT create_distributed_table('payments', 'merchant_id');
SELECT create_distributed_table('idempotency_keys', 'scope', colocate_with => 'payments');

-- optional: delegate autocommit calls to the worker that holds the scope
-- (calls inside a transaction block run on the node they are made on)
SELECT create_distributed_function(f, 'scope', colocate_with => 'idempotency_keys')
FROM unnest(ARRAY['idem_claim(text,jsonb,text,interval,interval,boolean)',
                  'idem_complete(text,integer,jsonb,text,bigint)',
                  'idem_fail(text,text,bigint,integer,jsonb,boolean)',
                  'idem_heartbeat(text,text,bigint,interval)',
                  'idem_release(text,text,bigint)',
                  'idem_checkpoint(text,text,text,bigint)',
                  'idem_resolve(text,text,text,integer,jsonb)',
                  'idem_lookup(text,text)',
                  'idem_execute(text,jsonb,text,integer,text,"any")',
                  'idem_execute(text,jsonb,text,integer,text)']::regprocedure[]) AS f;
