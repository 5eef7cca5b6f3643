-- test/citus/sql/distribute.sql: the README's "Scaling out" recipe, first
-- half, run on the coordinator as a superuser: a payments table distributed
-- by merchant id; idempotency_keys distributed by scope, co-located with it,
-- so that a scope's keys and its payments live on the same worker.
-- sql/delegate.sql is the second half.
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
