/*
 * The SQL edition's privileges, as the C build's: PUBLIC gets nothing;
 * idempotency_app may use the key functions and the table they use (the
 * functions run as their caller, so row level security applies to it);
 * idempotency_admin (a member of idempotency_app) settles keys, expires
 * and reads the counters.
 */
REVOKE ALL ON TABLE idempotency_keys FROM PUBLIC;
REVOKE ALL ON SEQUENCE idempotency_token_seq FROM PUBLIC;
REVOKE ALL ON TABLE idempotency_row_security FROM PUBLIC;
REVOKE ALL ON TABLE idempotency_stats FROM PUBLIC;
-- idem_execute's two overloads: edition/functions/idem_execute.sql (the edition cannot declare the C build's VARIADIC "any")
REVOKE ALL ON FUNCTION idem_checkpoint(text, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_checkpoint(text, text, text, bigint) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_claim_batch(text[], jsonb[], text, interval, interval, boolean, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_claim_batch(text[], jsonb[], text, interval, interval, boolean, integer) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_complete(text, integer, jsonb, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_complete(text, integer, jsonb, text, bigint) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_distribute(regclass, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_expire(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_expire(integer) TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_fail(text, text, bigint, integer, jsonb, boolean) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_heartbeat(text, text, bigint, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_heartbeat(text, text, bigint, interval) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_key_lock(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_key_lock(text, text, integer) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_row_storable(jsonb, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_row_storable(jsonb, text, bytea) TO idempotency_app;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE idempotency_keys TO idempotency_app;
REVOKE ALL ON FUNCTION idem_lookup(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_lookup(text, text) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_record_batch(text[], integer[], jsonb[], text, bigint[], boolean[], boolean[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_record_batch(text[], integer[], jsonb[], text, bigint[], boolean[], boolean[]) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_release(text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_release(text, text, bigint) TO idempotency_app;
REVOKE ALL ON FUNCTION idem_resolve(text, text, text, integer, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_resolve(text, text, text, integer, jsonb) TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_restore_row_security() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_row_security_restored() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_save_row_security() FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats() TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_stats_databases() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats_databases() TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_stats_reset() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats_reset() TO idempotency_admin;
REVOKE ALL ON FUNCTION idem_table_bytes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_table_bytes() TO idempotency_admin;
GRANT SELECT ON TABLE idempotency_row_security TO idempotency_app;
GRANT SELECT ON TABLE idempotency_stats TO idempotency_admin;
GRANT USAGE ON SEQUENCE idempotency_token_seq TO idempotency_app;
