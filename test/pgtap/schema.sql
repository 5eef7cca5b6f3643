/*
 * test/pgtap/schema.sql: the objects CREATE EXTENSION idempotency makes.
 *
 * Pins the contract of SPEC.md "Objects": the keys table with its columns,
 * types, key and indexes; the status enum; the token sequence; every
 * function's signature (argument names and defaults are part of the API,
 * callers use named arguments), return type, volatility, strictness and
 * parallel safety; the hardening of the install script (pinned search_path,
 * no SECURITY DEFINER); and that pg_dump keeps the keys and the sequence.
 *
 * Run with pg_prove against a database where a superuser has done
 * CREATE EXTENSION pgtap; CREATE EXTENSION idempotency;
 */
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;

SELECT plan(142);

/* ---- the table ---- */

SELECT has_table('idempotency_keys', 'table idempotency_keys exists');

SELECT columns_are('idempotency_keys', ARRAY[
    'scope', 'key', 'status', 'retryable', 'response_code', 'token',
    'locked_until', 'created_at', 'updated_at', 'expires_at',
    'request_hash', 'recovery_point', 'response', 'due_at', 'attempts'
], 'idempotency_keys has exactly the documented columns');

SELECT col_type_is('idempotency_keys', 'scope',          'text',                     'scope is text');
SELECT col_type_is('idempotency_keys', 'key',            'text',                     'key is text');
SELECT col_type_is('idempotency_keys', 'status',         'idempotency_status',       'status is idempotency_status');
SELECT col_type_is('idempotency_keys', 'retryable',      'boolean',                  'retryable is boolean');
SELECT col_type_is('idempotency_keys', 'response_code',  'integer',                  'response_code is integer');
SELECT col_type_is('idempotency_keys', 'token',          'bigint',                   'token is bigint (sequence-fed, Citus-safe)');
SELECT col_type_is('idempotency_keys', 'locked_until',   'timestamp with time zone', 'locked_until is timestamptz');
SELECT col_type_is('idempotency_keys', 'created_at',     'timestamp with time zone', 'created_at is timestamptz');
SELECT col_type_is('idempotency_keys', 'updated_at',     'timestamp with time zone', 'updated_at is timestamptz');
SELECT col_type_is('idempotency_keys', 'expires_at',     'timestamp with time zone', 'expires_at is timestamptz');
SELECT col_type_is('idempotency_keys', 'request_hash',   'bytea',                    'request_hash is bytea');
SELECT col_type_is('idempotency_keys', 'recovery_point', 'text',                     'recovery_point is text');
SELECT col_type_is('idempotency_keys', 'response',       'jsonb',                    'response is jsonb');
SELECT col_type_is('idempotency_keys', 'attempts',       'integer',                  'attempts is integer');

SELECT col_not_null('idempotency_keys', 'scope',      'scope is NOT NULL');
SELECT col_not_null('idempotency_keys', 'key',        'key is NOT NULL');
SELECT col_not_null('idempotency_keys', 'status',     'status is NOT NULL');
SELECT col_not_null('idempotency_keys', 'retryable',  'retryable is NOT NULL');
SELECT col_not_null('idempotency_keys', 'token',      'token is NOT NULL');
SELECT col_not_null('idempotency_keys', 'created_at', 'created_at is NOT NULL');
SELECT col_not_null('idempotency_keys', 'updated_at', 'updated_at is NOT NULL');
SELECT col_not_null('idempotency_keys', 'expires_at', 'expires_at is NOT NULL');
SELECT col_not_null('idempotency_keys', 'attempts',   'attempts is NOT NULL');
SELECT col_default_is('idempotency_keys', 'attempts', '1', 'attempts counts 1 for a row written without it');

SELECT col_is_null('idempotency_keys', 'response_code',  'response_code is nullable');
SELECT col_is_null('idempotency_keys', 'locked_until',   'locked_until is nullable');
SELECT col_is_null('idempotency_keys', 'request_hash',   'request_hash is nullable (no request given)');
SELECT col_is_null('idempotency_keys', 'recovery_point', 'recovery_point is nullable');
SELECT col_is_null('idempotency_keys', 'response',       'response is nullable');

SELECT col_default_is('idempotency_keys', 'scope', ''::text, 'scope defaults to the empty string');

SELECT col_is_pk('idempotency_keys', ARRAY['scope', 'key'],
                 'primary key is (scope, key), scope first so Citus can distribute by it');

SELECT has_index('idempotency_keys', 'idempotency_keys_due_at_idx', 'due_at',
                 'expiry index on due_at');
SELECT is((SELECT array_agg(indexrelid::regclass::text ORDER BY indexrelid::regclass::text) FROM pg_index
           WHERE indrelid = 'idempotency_keys'::regclass),
          ARRAY['idempotency_keys_due_at_idx', 'idempotency_keys_pkey'],
          'no other index: complete, fail, heartbeat and checkpoint change no indexed column (HOT)');
SELECT col_not_null('idempotency_keys', 'due_at', 'due_at is NOT NULL');
SELECT col_default_is('idempotency_keys', 'due_at', '-infinity'::timestamptz,
                      'due_at defaults to -infinity: a row written by hand is due at once, and expiry sets it');
SELECT is((SELECT reloptions FROM pg_class WHERE oid = 'idempotency_keys'::regclass), NULL,
          'the default fillfactor: completes follow inserts while the page has room, and storage stays dense');

/* ---- the enum ---- */

SELECT has_enum('idempotency_status', 'enum idempotency_status exists');
SELECT enum_has_labels('idempotency_status', ARRAY['processing', 'completed', 'failed'],
                       'idempotency_status labels, in order');

/* ---- the sequence ---- */

SELECT has_sequence('idempotency_token_seq', 'sequence idempotency_token_seq exists');
SELECT is((SELECT seqtypid::regtype::text FROM pg_sequence
           WHERE seqrelid = 'idempotency_token_seq'::regclass),
          'bigint', 'idempotency_token_seq is a bigint sequence');

/* ---- pg_dump: the keys and the sequence are configuration tables ---- */

SELECT ok('idempotency_keys'::regclass::oid = ANY (extconfig),
          'idempotency_keys is marked for pg_dump (pg_extension_config_dump)')
FROM pg_extension WHERE extname = 'idempotency';
SELECT ok('idempotency_token_seq'::regclass::oid = ANY (extconfig),
          'idempotency_token_seq is marked for pg_dump, so tokens are never reused after a restore')
FROM pg_extension WHERE extname = 'idempotency';
SELECT ok('idempotency_row_security'::regclass::oid = ANY (extconfig),
          'idempotency_row_security is marked for pg_dump, so the policies it records come back')
FROM pg_extension WHERE extname = 'idempotency';
SELECT has_trigger('idempotency_row_security', 'idempotency_row_security_restored',
                   'restoring idempotency_row_security puts its policies back (trigger)');
SELECT has_function('idem_save_row_security', ARRAY[]::name[], 'idem_save_row_security() exists');
SELECT has_function('idem_restore_row_security', ARRAY[]::name[], 'idem_restore_row_security() exists');
SELECT col_has_check('idempotency_keys', ARRAY['response', 'recovery_point', 'request_hash'],
                     'idempotency_keys refuses a response, recovery point or request hash pg_dump could not write');
SELECT is(extcondition[array_position(extconfig, 'idempotency_keys'::regclass::oid)], '',
          'pg_dump keeps every key row (no filter)')
FROM pg_extension WHERE extname = 'idempotency';

/* ---- functions: existence, exact signature, return type ---- */

SELECT has_function('idem_claim', ARRAY['text', 'jsonb', 'text', 'interval', 'interval', 'boolean', 'interval', 'integer'],
                    'idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer) exists');
SELECT has_function('idem_complete', ARRAY['text', 'integer', 'jsonb', 'text', 'bigint'],
                    'idem_complete(text, integer, jsonb, text, bigint) exists');
SELECT has_function('idem_fail', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'boolean'],
                    'idem_fail(text, text, bigint, integer, jsonb, boolean) exists');
SELECT has_function('idem_heartbeat', ARRAY['text', 'text', 'bigint', 'interval'],
                    'idem_heartbeat(text, text, bigint, interval) exists');
SELECT has_function('idem_release', ARRAY['text', 'text', 'bigint'],
                    'idem_release(text, text, bigint) exists');
SELECT has_function('idem_checkpoint', ARRAY['text', 'text', 'text', 'bigint'],
                    'idem_checkpoint(text, text, text, bigint) exists');
SELECT has_function('idem_resolve', ARRAY['text', 'text', 'text', 'integer', 'jsonb'],
                    'idem_resolve(text, text, text, integer, jsonb) exists');
SELECT has_function('idem_lookup', ARRAY['text', 'text'],
                    'idem_lookup(text, text) exists');
SELECT has_function('idem_request_hash', ARRAY['jsonb'], 'idem_request_hash(jsonb) exists');
SELECT has_function('idem_request_hash', ARRAY['bytea'], 'idem_request_hash(bytea) exists');
SELECT has_function('idem_request_hash', ARRAY['text'],  'idem_request_hash(text) exists');
SELECT has_function('idem_expire', ARRAY['integer'], 'idem_expire(integer) exists');
SELECT has_function('idem_execute', ARRAY['text', 'jsonb', 'text', 'integer', 'text', '"any"'],
    'idem_execute(key, request, scope, success_code, query, VARIADIC args) exists');
SELECT has_function('idem_execute', ARRAY['text', 'jsonb', 'text', 'integer', 'text'],
    'idem_execute(key, request, scope, success_code, query) exists');
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'idempotency'), '0.4.0',
    'the default version is 0.4.0');

SELECT function_returns('idem_claim', ARRAY['text', 'jsonb', 'text', 'interval', 'interval', 'boolean', 'interval', 'integer'],
                        'record', 'idem_claim returns a record (OUT parameters)');
SELECT function_returns('idem_complete', ARRAY['text', 'integer', 'jsonb', 'text', 'bigint'],
                        'void', 'idem_complete returns void');
SELECT function_returns('idem_fail', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'boolean'],
                        'void', 'idem_fail returns void');
SELECT function_returns('idem_heartbeat', ARRAY['text', 'text', 'bigint', 'interval'],
                        'timestamp with time zone', 'idem_heartbeat returns the new lease end');
SELECT function_returns('idem_release', ARRAY['text', 'text', 'bigint'],
                        'void', 'idem_release returns void');
SELECT function_returns('idem_checkpoint', ARRAY['text', 'text', 'text', 'bigint'],
                        'void', 'idem_checkpoint returns void');
SELECT function_returns('idem_resolve', ARRAY['text', 'text', 'text', 'integer', 'jsonb'],
                        'void', 'idem_resolve returns void');
SELECT function_returns('idem_lookup', ARRAY['text', 'text'],
                        'setof idempotency_keys', 'idem_lookup returns setof idempotency_keys');
SELECT function_returns('idem_request_hash', ARRAY['jsonb'], 'bytea', 'idem_request_hash(jsonb) returns bytea');
SELECT function_returns('idem_request_hash', ARRAY['bytea'], 'bytea', 'idem_request_hash(bytea) returns bytea');
SELECT function_returns('idem_request_hash', ARRAY['text'],  'bytea', 'idem_request_hash(text) returns bytea');
SELECT function_returns('idem_expire', ARRAY['integer'], 'bigint', 'idem_expire returns bigint (rows changed)');

/*
 * Argument names and defaults: callers write request => ..., scope => ...,
 * token => ..., so renaming or reordering one breaks them.
 */
SELECT is(pg_get_function_arguments('idem_claim(text, jsonb, text, interval, interval, boolean, interval, integer)'::regprocedure),
          'key text, request jsonb DEFAULT NULL::jsonb, scope text DEFAULT ''''::text, '
          'lease interval DEFAULT NULL::interval, retention interval DEFAULT NULL::interval, '
          'wait boolean DEFAULT true, await_result interval DEFAULT NULL::interval, '
          'max_attempts integer DEFAULT NULL::integer, OUT outcome text, OUT token bigint, '
          'OUT status idempotency_status, OUT response_code integer, OUT response jsonb, '
          'OUT retry_after interval, OUT recovery_point text',
          'idem_claim argument names, defaults and OUT columns');
SELECT is(pg_get_function_arguments('idem_complete(text, integer, jsonb, text, bigint)'::regprocedure),
          'key text, response_code integer, response jsonb, scope text DEFAULT ''''::text, '
          'token bigint DEFAULT NULL::bigint',
          'idem_complete argument names and defaults');
SELECT is(pg_get_function_arguments('idem_fail(text, text, bigint, integer, jsonb, boolean)'::regprocedure),
          'key text, scope text DEFAULT ''''::text, token bigint DEFAULT NULL::bigint, '
          'response_code integer DEFAULT NULL::integer, response jsonb DEFAULT NULL::jsonb, '
          'retryable boolean DEFAULT true',
          'idem_fail argument names and defaults (retryable by default)');
SELECT is(pg_get_function_arguments('idem_heartbeat(text, text, bigint, interval)'::regprocedure),
          'key text, scope text DEFAULT ''''::text, token bigint DEFAULT NULL::bigint, '
          'lease interval DEFAULT NULL::interval',
          'idem_heartbeat argument names and defaults');
SELECT is(pg_get_function_arguments('idem_release(text, text, bigint)'::regprocedure),
          'key text, scope text DEFAULT ''''::text, token bigint DEFAULT NULL::bigint',
          'idem_release argument names and defaults');
SELECT is(pg_get_function_arguments('idem_checkpoint(text, text, text, bigint)'::regprocedure),
          'key text, recovery_point text, scope text DEFAULT ''''::text, token bigint DEFAULT NULL::bigint',
          'idem_checkpoint argument names and defaults');
SELECT is(pg_get_function_arguments('idem_resolve(text, text, text, integer, jsonb)'::regprocedure),
          'key text, scope text, action text, response_code integer DEFAULT NULL::integer, '
          'response jsonb DEFAULT NULL::jsonb',
          'idem_resolve argument names and defaults (scope has no default: an operator names it)');
SELECT is(pg_get_function_arguments('idem_lookup(text, text)'::regprocedure),
          'key text, scope text DEFAULT ''''::text',
          'idem_lookup argument names and defaults');
SELECT is(pg_get_function_arguments('idem_expire(integer)'::regprocedure),
          'max_rows integer DEFAULT NULL::integer',
          'idem_expire argument names and defaults');

/* ---- volatility ---- */

SELECT volatility_is('idem_claim', ARRAY['text', 'jsonb', 'text', 'interval', 'interval', 'boolean', 'interval', 'integer'],
                     'volatile', 'idem_claim is VOLATILE');
SELECT volatility_is('idem_complete', ARRAY['text', 'integer', 'jsonb', 'text', 'bigint'],
                     'volatile', 'idem_complete is VOLATILE');
SELECT volatility_is('idem_fail', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'boolean'],
                     'volatile', 'idem_fail is VOLATILE');
SELECT volatility_is('idem_heartbeat', ARRAY['text', 'text', 'bigint', 'interval'],
                     'volatile', 'idem_heartbeat is VOLATILE');
SELECT volatility_is('idem_release', ARRAY['text', 'text', 'bigint'],
                     'volatile', 'idem_release is VOLATILE');
SELECT volatility_is('idem_checkpoint', ARRAY['text', 'text', 'text', 'bigint'],
                     'volatile', 'idem_checkpoint is VOLATILE');
SELECT volatility_is('idem_resolve', ARRAY['text', 'text', 'text', 'integer', 'jsonb'],
                     'volatile', 'idem_resolve is VOLATILE');
SELECT volatility_is('idem_lookup', ARRAY['text', 'text'],
                     'stable', 'idem_lookup is STABLE');
SELECT volatility_is('idem_request_hash', ARRAY['jsonb'], 'immutable', 'idem_request_hash(jsonb) is IMMUTABLE');
SELECT volatility_is('idem_request_hash', ARRAY['bytea'], 'immutable', 'idem_request_hash(bytea) is IMMUTABLE');
SELECT volatility_is('idem_request_hash', ARRAY['text'],  'immutable', 'idem_request_hash(text) is IMMUTABLE');
SELECT volatility_is('idem_expire', ARRAY['integer'], 'volatile', 'idem_expire is VOLATILE');

/*
 * Strictness: a NULL key must raise 22004, not quietly return NULL, so the
 * key functions are not STRICT; the hash functions are.
 */
SELECT isnt_strict('idem_claim', ARRAY['text', 'jsonb', 'text', 'interval', 'interval', 'boolean', 'interval', 'integer'],
                   'idem_claim is not STRICT (NULL key is an error, not a NULL result)');
SELECT isnt_strict('idem_complete', ARRAY['text', 'integer', 'jsonb', 'text', 'bigint'],
                   'idem_complete is not STRICT');
SELECT isnt_strict('idem_fail', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'boolean'],
                   'idem_fail is not STRICT');
SELECT isnt_strict('idem_heartbeat', ARRAY['text', 'text', 'bigint', 'interval'],
                   'idem_heartbeat is not STRICT');
SELECT isnt_strict('idem_release', ARRAY['text', 'text', 'bigint'],
                   'idem_release is not STRICT');
SELECT isnt_strict('idem_checkpoint', ARRAY['text', 'text', 'text', 'bigint'],
                   'idem_checkpoint is not STRICT');
SELECT isnt_strict('idem_resolve', ARRAY['text', 'text', 'text', 'integer', 'jsonb'],
                   'idem_resolve is not STRICT');
SELECT is_strict('idem_request_hash', ARRAY['jsonb'], 'idem_request_hash(jsonb) is STRICT');
SELECT is_strict('idem_request_hash', ARRAY['bytea'], 'idem_request_hash(bytea) is STRICT');
SELECT is_strict('idem_request_hash', ARRAY['text'],  'idem_request_hash(text) is STRICT');

/* Parallel safety: writers UNSAFE, lookup RESTRICTED, hashing SAFE. */
SELECT is(
    (SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text)
     FROM pg_proc p
     JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                     AND d.deptype = 'e'
     JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
     WHERE (p.proname IN ('idem_claim', 'idem_complete', 'idem_fail', 'idem_heartbeat',
                          'idem_release', 'idem_checkpoint', 'idem_resolve', 'idem_expire',
                          'idem_stats_reset')
            AND p.proparallel <> 'u')
        OR (p.proname = 'idem_lookup' AND p.proparallel <> 'r')
        OR (p.proname = 'idem_request_hash' AND p.proparallel <> 's')),
    NULL,
    'writers are PARALLEL UNSAFE, idem_lookup RESTRICTED, idem_request_hash SAFE');

/* ---- statistics ---- */

SELECT has_view('idempotency_stats', 'view idempotency_stats exists');
SELECT is(
    (SELECT array_agg(c ORDER BY c)
     FROM unnest(ARRAY['claims_new', 'claims_replay', 'claims_in_progress', 'claims_reclaimed',
                       'claims_stale', 'claims_awaited', 'request_mismatches',
                       'attempts_exhausted', 'completes', 'fails',
                       'leases_expired', 'rows_deleted', 'stats_reset']) AS c
     WHERE NOT EXISTS (SELECT FROM pg_attribute a
                       WHERE a.attrelid = 'idempotency_stats'::regclass
                         AND a.attname = c AND NOT a.attisdropped)),
    NULL,
    'idempotency_stats has counters for claims by outcome, awaited claims, mismatches, exhausted attempts, completes, fails, expired leases, deleted rows');
SELECT has_function('idem_stats_databases', ARRAY[]::name[], 'idem_stats_databases() exists');
SELECT is((SELECT count(*) FROM idem_stats_databases() WHERE dbid IS NOT DISTINCT FROM (SELECT oid FROM pg_database WHERE datname = current_database())) <= 1,
          true, 'idem_stats_databases() has at most one row for this database');
SELECT has_function('idem_stats_reset', ARRAY[]::name[], 'idem_stats_reset() exists');
SELECT function_returns('idem_stats_reset', ARRAY[]::name[], 'void', 'idem_stats_reset returns void');
SELECT volatility_is('idem_stats_reset', ARRAY[]::name[], 'volatile', 'idem_stats_reset is VOLATILE');

/* ---- Citus helpers: usable (and refused with a reason) on a plain server ---- */

SELECT has_function('idem_distribute', ARRAY['regclass', 'boolean'],
                    'idem_distribute(colocate_with regclass, delegate boolean) exists');
SELECT throws_ok('SELECT idem_distribute()', '55000', 'Citus is not installed in this database',
                 'idem_distribute() without Citus: 55000, the table stays as it is');
SELECT has_function('idem_table_bytes', ARRAY[]::name[], 'idem_table_bytes() exists');
SELECT is(idem_table_bytes(), pg_total_relation_size('idempotency_keys'),
          'idem_table_bytes() on a plain server is the table''s total size');

/* ---- hardening, over every function the extension owns ---- */

SELECT cmp_ok(
    (SELECT count(*)
     FROM pg_depend d
     WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')),
    '>=', 12::bigint,
    'the extension owns at least the 12 documented functions');

/*
 * No C function has a SET clause: those that run SQL pin search_path to
 * pg_catalog, pg_temp in C for exactly the span of their own statements
 * (src/store.c, IdemPinSearchPath; idem_execute's caller's statement runs
 * under the caller's path), which test/pgtap/security.sql checks under a
 * hostile path.  The PL/pgSQL helpers pin it with the SET clause.
 */
SELECT is(
    (SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text)
     FROM pg_proc p
     JOIN pg_language l ON l.oid = p.prolang AND l.lanname = 'c'
     JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                     AND d.deptype = 'e'
     JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
     WHERE p.proconfig IS NOT NULL),
    NULL,
    'no C function has a SET clause (they pin search_path in C)');

SELECT is(
    (SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text)
     FROM pg_proc p
     JOIN pg_language l ON l.oid = p.prolang AND l.lanname <> 'c'
     JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                     AND d.deptype = 'e'
     JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
     WHERE p.proconfig[1] IS DISTINCT FROM 'search_path=pg_catalog, pg_temp'
        OR p.proconfig[2:] <> CASE p.proname
               WHEN 'idem_save_row_security' THEN
                   ARRAY['quote_all_identifiers=off', 'standard_conforming_strings=on', 'DateStyle=ISO, MDY',
                         'IntervalStyle=postgres', 'TimeZone=UTC', 'extra_float_digits=1',
                         'bytea_output=hex', 'lc_monetary=C']
               WHEN 'idem_restore_row_security' THEN ARRAY['standard_conforming_strings=on']
               ELSE '{}' END),
    NULL,
    'every other function pins search_path to exactly pg_catalog, pg_temp by its SET clause');
/* (idem_save_row_security and idem_restore_row_security also pin the settings that change how an expression is written or read) */

SELECT is(
    (SELECT array_agg(p.oid::regprocedure::text ORDER BY p.oid::regprocedure::text)
     FROM pg_proc p
     JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                     AND d.deptype = 'e'
     JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
     WHERE p.prosecdef),
    NULL,
    'no extension function is SECURITY DEFINER (row level security applies to callers)');

SELECT isnt_definer('idem_claim', ARRAY['text', 'jsonb', 'text', 'interval', 'interval', 'boolean', 'interval', 'integer'],
                    'idem_claim is SECURITY INVOKER');
SELECT isnt_definer('idem_complete', ARRAY['text', 'integer', 'jsonb', 'text', 'bigint'],
                    'idem_complete is SECURITY INVOKER');
SELECT isnt_definer('idem_fail', ARRAY['text', 'text', 'bigint', 'integer', 'jsonb', 'boolean'],
                    'idem_fail is SECURITY INVOKER');
SELECT isnt_definer('idem_heartbeat', ARRAY['text', 'text', 'bigint', 'interval'],
                    'idem_heartbeat is SECURITY INVOKER');
SELECT isnt_definer('idem_release', ARRAY['text', 'text', 'bigint'],
                    'idem_release is SECURITY INVOKER');
SELECT isnt_definer('idem_checkpoint', ARRAY['text', 'text', 'text', 'bigint'],
                    'idem_checkpoint is SECURITY INVOKER');
SELECT isnt_definer('idem_resolve', ARRAY['text', 'text', 'text', 'integer', 'jsonb'],
                    'idem_resolve is SECURITY INVOKER');
SELECT isnt_definer('idem_lookup', ARRAY['text', 'text'], 'idem_lookup is SECURITY INVOKER');
SELECT isnt_definer('idem_expire', ARRAY['integer'], 'idem_expire is SECURITY INVOKER');

/*
 * Every object carries a COMMENT (house style).  From 17 on the extension's
 * members include the row types of its table and view and the array types
 * PostgreSQL makes for its types, which no script creates: not counted.
 */
SELECT is(
    (SELECT array_agg(pg_describe_object(d.classid, d.objid, 0) ORDER BY 1)
     FROM pg_depend d
     JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency'
     WHERE d.deptype = 'e'
       AND NOT (d.classid = 'pg_type'::regclass AND EXISTS (
           SELECT FROM pg_type t
           WHERE t.oid = d.objid
             AND (t.typrelid <> 0
                  OR EXISTS (SELECT FROM pg_type el WHERE el.typarray = t.oid))))
       AND obj_description(d.objid, (SELECT relname FROM pg_class WHERE oid = d.classid)) IS NULL),
    NULL,
    'every object of the extension has a COMMENT');

/* ---- roles ---- */

SELECT has_role('idempotency_app', 'role idempotency_app exists');
SELECT has_role('idempotency_admin', 'role idempotency_admin exists');
SELECT is((SELECT rolcanlogin FROM pg_roles WHERE rolname = 'idempotency_app'), false,
          'idempotency_app cannot log in (NOLOGIN; grant it to roles that do)');
SELECT is((SELECT rolcanlogin FROM pg_roles WHERE rolname = 'idempotency_admin'), false,
          'idempotency_admin cannot log in');
SELECT isnt_superuser('idempotency_app', 'idempotency_app is not a superuser');
SELECT isnt_superuser('idempotency_admin', 'idempotency_admin is not a superuser');

/* ---- the extension itself ---- */

SELECT has_extension('idempotency', 'extension idempotency is installed');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'idempotency'), false,
          'extension is not relocatable');

SELECT * FROM finish();
ROLLBACK;
