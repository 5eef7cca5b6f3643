-- Database setup shared by the examples (examples/http, examples/go, examples/java, examples/rust).
--
-- Run it once per database AS A SUPERUSER (CREATE EXTENSION idempotency needs
-- one: the extension is not trusted), naming the role the service logs in as:
--
--   psql -d payments -v service_role=payments_service -f examples/db/schema.sql
--
-- It changes nothing that already exists: the extension and the table are
-- created only when missing (an existing payments table is kept as it is, so
-- check it has these columns), and the grants are idempotent.  The service
-- role itself needs no superuser, no ownership and no CREATE privilege: the
-- grants below are everything it uses.
\set ON_ERROR_STOP on
\if :{?service_role}
\else
DO $$ BEGIN RAISE EXCEPTION 'service_role is not set'
    USING HINT = 'psql -v service_role=ROLE -f schema.sql, ROLE being the login role of the service'; END $$;
\endif

CREATE EXTENSION IF NOT EXISTS idempotency;

CREATE TABLE IF NOT EXISTS payments (
    id               bigserial PRIMARY KEY,
    scope            text        NOT NULL,          -- the Merchant-Id header
    order_id         text        NOT NULL,
    amount           bigint      NOT NULL CHECK (amount > 0),   -- minor units
    currency         text,
    authorization_id text,                          -- card mode: the card network's id
    created_at       timestamptz NOT NULL DEFAULT now()
);

-- idempotency_app: the key functions and the idempotency_keys table (the
-- functions run as the caller).  The rest: the payments table.
GRANT idempotency_app TO :"service_role";
GRANT USAGE ON SCHEMA public TO :"service_role";
GRANT SELECT, INSERT ON payments TO :"service_role";
GRANT USAGE ON SEQUENCE payments_id_seq TO :"service_role";
