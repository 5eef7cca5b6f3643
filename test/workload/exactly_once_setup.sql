-- test/workload/exactly_once_setup.sql: fresh tables for test/workload/claim_contention.sql.
--
-- Everything lives in schema idem_bench, dropped and made anew, so the
-- benchmark never touches an application's own tables; the keys it claims
-- are in scope 'idem-bench' and are deleted first so a rerun starts clean.
-- Run by a superuser (or the extension's owner) with psql:
--   psql -v ON_ERROR_STOP=1 -f test/workload/exactly_once_setup.sql

SET client_min_messages = warning;

CREATE EXTENSION IF NOT EXISTS idempotency;

DROP SCHEMA IF EXISTS idem_bench CASCADE;
CREATE SCHEMA idem_bench;

-- No unique constraint on key, on purpose: a double charge must be visible.
CREATE TABLE idem_bench.payments (
    id     bigserial PRIMARY KEY,
    key    text NOT NULL,
    amount integer NOT NULL
);

-- One row per claim, written in the claim's own statement.
CREATE TABLE idem_bench.claims (
    id            bigserial PRIMARY KEY,
    key           text NOT NULL,
    outcome       text NOT NULL,
    token         bigint,
    status        text,
    response_code integer,
    response      jsonb
);

DELETE FROM idempotency_keys WHERE scope = 'idem-bench';

-- So the benchmark can also run as a role that was only granted idempotency_app.
GRANT USAGE ON SCHEMA idem_bench TO idempotency_app;
GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA idem_bench TO idempotency_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA idem_bench TO idempotency_app;
