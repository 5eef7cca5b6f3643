CREATE EXTENSION IF NOT EXISTS idempotency;
DROP TABLE IF EXISTS payments;
CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL, amount int NOT NULL);
