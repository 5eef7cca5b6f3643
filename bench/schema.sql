-- bench/schema.sql: the service's own tables for bench/run.sh and
-- bench/profile.sh (created by the role app; bench/plpgsql_reference.sql
-- comes after it).
--
-- payments     the work every variant does: a plain INSERT (the floor)
-- payments_uk  the same with a unique order_id (INSERT ... ON CONFLICT DO NOTHING)
-- limit_keys   the physical limit's bare key row: the primary key
--              idempotency_keys has, the request hash and the response,
--              nothing else (no status, token, lease, timestamps or other
--              indexes)

CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX payments_order_id_idx ON payments (order_id);

CREATE TABLE payments_uk (id bigserial PRIMARY KEY, order_id text NOT NULL UNIQUE, amount int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now());

CREATE TABLE limit_keys (scope text NOT NULL, key text NOT NULL, request_hash bytea, response jsonb,
    PRIMARY KEY (scope, key));
