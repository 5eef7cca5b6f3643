/* Keys are data: pg_dump must keep them, the token sequence and the policies with them. */
SELECT pg_catalog.pg_extension_config_dump('idempotency_keys', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency_token_seq', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency_row_security', '');
SELECT pg_catalog.pg_extension_config_dump('idempotency_settings', '');
