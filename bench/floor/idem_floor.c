/*-------------------------------------------------------------------------
 *
 * idem_floor.c
 *	  The benchmark's SPI floor: the least any extension can do that keeps
 *	  idempotency keys in a table and reaches it only through SQL, run from
 *	  C through SPI (as idempotency does, so that the table can be a Citus
 *	  shell).  Not part of the extension; bench/run.sh and bench/profile.sh
 *	  build it and measure it beside the extension.
 *
 * spi_floor_execute is idem_execute with nothing but its statements: read
 * the key's row (a replay returns its response), insert the payment, insert
 * the key row with the response.  No request hash computed (the client
 * passes one, as to the limit), no check, no lock, no token, no lease, no
 * subtransaction, no pinned search_path, no result row type.
 * spi_floor_execute_tenant is the same on Citus (bench/citus.sh), for the
 * README recipe's payments table (merchant_id, key, amount), distributed
 * with limit_keys by the tenant and delegated by it: every statement planned
 * afresh (a custom plan, as the extension's under Citus), and the read with
 * the scope written into its text, as the extension reads a key whose shard
 * is on the node, so that Citus plans it straight on the shard.
 * spi_floor_rules is spi_floor_execute under the rules any extension that
 * keeps the keys must follow, with the extension's own code for them (found
 * in idempotency.so by load_external_function, so one copy of each): the
 * request hashed by the server (IdemHashJsonb) and a replay's hash compared
 * with the stored one, a different request an error; search_path pinned
 * around its own statements (IdemPinSearchPath), the payment's statement
 * run between them under the caller's path.  Nothing else of the
 * extension's: no lock, token, lease, subtransaction, result row type.
 * spi_floor_claim and spi_floor_complete are the explicit pattern's two
 * calls with one statement each: an INSERT ... ON CONFLICT DO NOTHING of
 * the key row, an UPDATE of its response.  The table is the limit's
 * limit_keys (primary key, request hash, response), so the floor differs
 * from the limit only in running its statements through SPI.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(spi_floor_execute);
PG_FUNCTION_INFO_V1(spi_floor_claim);
PG_FUNCTION_INFO_V1(spi_floor_complete);
PG_FUNCTION_INFO_V1(spi_floor_execute_tenant);
PG_FUNCTION_INFO_V1(spi_floor_rules);

typedef enum FloorStmt
{
	FLOOR_READ,
	FLOOR_READ_HASH,
	FLOOR_PAY,
	FLOOR_KEY,
	FLOOR_CLAIM,
	FLOOR_COMPLETE,
	FLOOR_TENANT_PAY,
	FLOOR_NUM_STMTS
} FloorStmt;

static const struct
{
	const char *sql;
	int			nargs;
	Oid			types[4];
}			floor_stmts[FLOOR_NUM_STMTS] = {
	[FLOOR_READ] = {"SELECT response FROM public.limit_keys WHERE scope = $1 AND key = $2",
	2, {TEXTOID, TEXTOID}},
	[FLOOR_READ_HASH] = {"SELECT request_hash, response FROM public.limit_keys WHERE scope = $1 AND key = $2",
	2, {TEXTOID, TEXTOID}},
	[FLOOR_PAY] = {"INSERT INTO public.payments (order_id, amount) VALUES ($1, $2) RETURNING id",
	2, {TEXTOID, INT4OID}},
	[FLOOR_KEY] = {"INSERT INTO public.limit_keys (scope, key, request_hash, response)"
		" VALUES ($1, $2, $3, pg_catalog.jsonb_build_object('id', $4::bigint)) RETURNING response",
	4, {TEXTOID, TEXTOID, BYTEAOID, INT8OID}},
	[FLOOR_CLAIM] = {"INSERT INTO public.limit_keys (scope, key, request_hash) VALUES ($1, $2, $3)"
		" ON CONFLICT DO NOTHING RETURNING true",
	3, {TEXTOID, TEXTOID, BYTEAOID}},
	[FLOOR_COMPLETE] = {"UPDATE public.limit_keys SET response = $3 WHERE scope = $1 AND key = $2",
	3, {TEXTOID, TEXTOID, JSONBOID}},
	[FLOOR_TENANT_PAY] = {"INSERT INTO public.payments (merchant_id, key, amount) VALUES ($1, $2, $3) RETURNING id",
	3, {TEXTOID, TEXTOID, INT4OID}},
};

static SPIPlanPtr floor_plans[FLOOR_NUM_STMTS];

/* The extension's own code for the rules (see the top of the file) */
typedef int (*PinFn) (void);
typedef void (*UnpinFn) (int pin);
typedef bytea *(*HashFn) (Datum jsonb);

static PinFn pin_search_path;
static UnpinFn unpin_search_path;
static HashFn hash_jsonb;

static void
FloorLoadRules(void)
{
	if (hash_jsonb != NULL)
		return;
	pin_search_path = (PinFn)
		load_external_function("$libdir/idempotency", "IdemPinSearchPath", true, NULL);
	unpin_search_path = (UnpinFn)
		load_external_function("$libdir/idempotency", "IdemUnpinSearchPath", true, NULL);
	hash_jsonb = (HashFn)
		load_external_function("$libdir/idempotency", "IdemHashJsonb", true, NULL);
}

/*
 * Under Citus a custom plan for every execution, as the extension's own
 * statements (store.c, PlanOptionsNow): Citus 13.2 plans a generic plan's
 * shard query again at each execution and keeps every copy.
 */
static int
FloorPlanOptions(void)
{
	return OidIsValid(get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE)) ?
		CURSOR_OPT_CUSTOM_PLAN : 0;
}

/* Run one statement (prepared and kept on first use); returns its row count */
static uint64
FloorRun(FloorStmt stmt, Datum *values)
{
	if (floor_plans[stmt] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare_cursor(floor_stmts[stmt].sql, floor_stmts[stmt].nargs,
											  (Oid *) floor_stmts[stmt].types, FloorPlanOptions());

		if (plan == NULL || SPI_keepplan(plan) != 0)
			elog(ERROR, "could not prepare \"%s\"", floor_stmts[stmt].sql);
		floor_plans[stmt] = plan;
	}
	if (SPI_execute_plan(floor_plans[stmt], values, NULL, false, 0) < 0)
		elog(ERROR, "could not run \"%s\"", floor_stmts[stmt].sql);
	return SPI_processed;
}

/*
 * The first column of the statement's first row: a bigint, or a jsonb
 * copied out of SPI's memory (it is the function's result)
 */
static Datum
FloorResult(bool jsonb)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

	if (isnull)
		elog(ERROR, "unexpected null");
	return jsonb ? SPI_datumTransfer(d, false, -1) : d;
}

/*
 * A new key: the payment (statement pay with its arguments), then the key
 * row with the payment's id (key[3]), under a pinned search_path if
 * pinned (spi_floor_rules); returns the key row's response
 */
static Datum
FloorNewKey(FloorStmt pay_stmt, Datum *pay, Datum *key, bool pinned)
{
	int			pin = 0;
	Datum		response;

	FloorRun(pay_stmt, pay);
	key[3] = FloorResult(false);
	if (pinned)
		pin = pin_search_path();
	FloorRun(FLOOR_KEY, key);
	response = FloorResult(true);
	if (pinned)
		unpin_search_path(pin);
	return response;
}

/* spi_floor_execute(scope, key, request_hash, order_id, amount) RETURNS jsonb */
Datum
spi_floor_execute(PG_FUNCTION_ARGS)
{
	Datum		read[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
	Datum		pay[2] = {PG_GETARG_DATUM(3), PG_GETARG_DATUM(4)};
	Datum		key[4] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), 0};
	Datum		response;

	SPI_connect();
	if (FloorRun(FLOOR_READ, read) == 1)
		response = FloorResult(true);
	else
		response = FloorNewKey(FLOOR_PAY, pay, key, false);
	SPI_finish();
	PG_RETURN_DATUM(response);
}

/* spi_floor_claim(scope, key, request_hash) RETURNS boolean: new? */
Datum
spi_floor_claim(PG_FUNCTION_ARGS)
{
	Datum		args[3] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2)};
	bool		claimed;

	SPI_connect();
	claimed = FloorRun(FLOOR_CLAIM, args) == 1;
	SPI_finish();
	PG_RETURN_BOOL(claimed);
}

/* spi_floor_complete(scope, key, response) RETURNS void */
Datum
spi_floor_complete(PG_FUNCTION_ARGS)
{
	Datum		args[3] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2)};

	SPI_connect();
	if (FloorRun(FLOOR_COMPLETE, args) != 1)
		elog(ERROR, "no key row to complete");
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * spi_floor_execute_tenant(scope, key, request_hash, amount) RETURNS jsonb:
 * spi_floor_execute on Citus (see the top of the file).  The key row's
 * INSERT is FLOOR_KEY, planned afresh too: Citus routes an INSERT at each
 * execution whatever its plan.
 */
Datum
spi_floor_execute_tenant(PG_FUNCTION_ARGS)
{
	char	   *read = psprintf("SELECT response FROM public.limit_keys WHERE scope = %s AND key = $1",
								quote_literal_cstr(text_to_cstring(PG_GETARG_TEXT_PP(0))));
	Oid			read_types[1] = {TEXTOID};
	Datum		read_args[1] = {PG_GETARG_DATUM(1)};
	Datum		pay[3] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(3)};
	Datum		key[4] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2), 0};
	Datum		response;

	SPI_connect();
	if (SPI_execute_with_args(read, 1, read_types, read_args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run \"%s\"", read);
	if (SPI_processed == 1)
		response = FloorResult(true);
	else
		response = FloorNewKey(FLOOR_TENANT_PAY, pay, key, false);
	SPI_finish();
	PG_RETURN_DATUM(response);
}

/*
 * A replay: the stored request hash (column 1 of the read) must be the
 * request's; returns the stored response
 */
static Datum
FloorReplay(bytea *hash)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	bytea	   *stored = isnull ? NULL : DatumGetByteaPP(d);

	if (stored == NULL || VARSIZE_ANY_EXHDR(stored) != VARSIZE_ANY_EXHDR(hash) ||
		memcmp(VARDATA_ANY(stored), VARDATA_ANY(hash), VARSIZE_ANY_EXHDR(hash)) != 0)
		ereport(ERROR,
				(errcode(MAKE_SQLSTATE('I', 'K', '0', '0', '1')),	/* the extension's */
				 errmsg("key reused with a different request")));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (isnull)
		elog(ERROR, "unexpected null");
	return SPI_datumTransfer(d, false, -1);
}

/* spi_floor_rules(scope, key, request jsonb, order_id, amount) RETURNS jsonb */
Datum
spi_floor_rules(PG_FUNCTION_ARGS)
{
	bytea	   *hash;
	Datum		read[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
	Datum		pay[2] = {PG_GETARG_DATUM(3), PG_GETARG_DATUM(4)};
	Datum		key[4] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), 0, 0};
	Datum		response;
	int			pin;

	FloorLoadRules();
	hash = hash_jsonb(PG_GETARG_DATUM(2));
	key[2] = PointerGetDatum(hash);

	SPI_connect();
	pin = pin_search_path();
	if (FloorRun(FLOOR_READ_HASH, read) == 1)
	{
		response = FloorReplay(hash);
		unpin_search_path(pin);
	}
	else
	{
		unpin_search_path(pin);
		response = FloorNewKey(FLOOR_PAY, pay, key, true);
	}
	SPI_finish();
	PG_RETURN_DATUM(response);
}
