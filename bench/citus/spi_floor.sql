-- (5) the SPI floor with a new key (autocommit): read the key, INSERT the
-- payment, INSERT a bare key row (bench/floor/idem_floor.c), delegated by scope
\set m random(1, 1000)
\set k random(1000000000, 999999999999999)
SELECT spi_floor_execute_tenant(:m, :k, '\x6f1c2e83a5b94d7f8e0a1b2c3d4e5f60718293a4b5c6d7e8f900112233445566'::bytea, 5);
