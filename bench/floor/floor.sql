-- bench/floor/floor.sql: the SPI floor's functions (bench/floor/idem_floor.c),
-- created by a superuser after bench/schema.sql, for the role app.
CREATE FUNCTION spi_floor_execute(scope text, key text, request_hash bytea, order_id text, amount int)
    RETURNS jsonb LANGUAGE c STRICT AS '$libdir/idem_floor', 'spi_floor_execute';
CREATE FUNCTION spi_floor_claim(scope text, key text, request_hash bytea)
    RETURNS boolean LANGUAGE c STRICT AS '$libdir/idem_floor', 'spi_floor_claim';
CREATE FUNCTION spi_floor_complete(scope text, key text, response jsonb)
    RETURNS void LANGUAGE c STRICT AS '$libdir/idem_floor', 'spi_floor_complete';
-- spi_floor_execute under the rules: the request hashed and checked by the server,
-- search_path pinned around its own statements (the extension's code for both)
CREATE FUNCTION spi_floor_rules(scope text, key text, request jsonb, order_id text, amount int)
    RETURNS jsonb LANGUAGE c STRICT AS '$libdir/idem_floor', 'spi_floor_rules';
-- On Citus (bench/citus.sh): spi_floor_execute for the README recipe's payments table
CREATE FUNCTION spi_floor_execute_tenant(scope text, key text, request_hash bytea, amount int)
    RETURNS jsonb LANGUAGE c STRICT AS '$libdir/idem_floor', 'spi_floor_execute_tenant';
