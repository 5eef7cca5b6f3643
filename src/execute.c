/*-------------------------------------------------------------------------
 *
 * execute.c
 *	  idem_execute(): claim a key, run the caller's statement and record its
 *	  result, in one call and so in one round trip.
 *
 * When the claim is new (or reclaimed) the caller's parameterised statement
 * runs in the same transaction, its result row becomes the stored response
 * (as jsonb) and the key is completed; otherwise the call returns what the
 * claim found and runs nothing.  An error in the statement aborts the
 * statement, and the claim with it.
 *
 * It is the explicit pattern (claim, statement, complete) done inside the
 * server: the same statements, without the round trips between them.
 *
 * The caller's statement must resolve names as the caller wrote it, so this
 * function has no SET search_path clause; instead the extension's own
 * statements run under a pinned search_path (pg_catalog, pg_temp) set and
 * reset around them, and the caller's statement runs under the caller's.
 * Caller statements are prepared once per backend and kept in a small
 * cache keyed by their text and argument types.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/timestamp.h"

#include "idempotency.h"

PG_FUNCTION_INFO_V1(idem_execute);

/* Arguments of idem_execute before the statement's own */
#define EXEC_FIXED_ARGS 5

/* Statements kept prepared per backend */
#define EXEC_CACHE_SIZE 16

typedef struct ExecPlan
{
	char	   *sql;			/* the caller's text, in TopMemoryContext */
	int			nargs;
	Oid			argtypes[FUNC_MAX_ARGS];
	SPIPlanPtr	plan;
} ExecPlan;

static ExecPlan exec_cache[EXEC_CACHE_SIZE];
static int	exec_cache_next = 0;

/*
 * Pin search_path for the extension's own statements; undo with
 * AtEOXact_GUC(true, level).
 */
static int
PinSearchPath(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/* Does a prepared statement return rows? */
static bool
StatementReturnsRows(SPIPlanPtr plan, IdemClaimArgs *a)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);

	if (list_length(sources) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("statement given to idem_execute must be a single statement"),
				 IdemErrdetailKey(a->key, a->scope)));
	return ((CachedPlanSource *) linitial(sources))->resultDesc != NULL;
}

/*
 * The saved plan of the caller's statement, wrapped so that it returns its
 * result row as one jsonb.  Must be called inside SPI.
 */
static SPIPlanPtr
StatementPlan(const char *sql, int nargs, Oid *argtypes, IdemClaimArgs *a)
{
	ExecPlan   *slot;
	char	   *wrapped;
	int			len;
	SPIPlanPtr	plan;

	for (int i = 0; i < EXEC_CACHE_SIZE; i++)
	{
		ExecPlan   *p = &exec_cache[i];

		if (p->plan != NULL && p->nargs == nargs &&
			strcmp(p->sql, sql) == 0 &&
			memcmp(p->argtypes, argtypes, sizeof(Oid) * nargs) == 0)
			return p->plan;
	}

	/*
	 * Prepare it as given first: that checks it and tells whether it returns
	 * rows.  A statement that does (SELECT, or DML with RETURNING) is then
	 * wrapped to return its row as one jsonb; one that does not is kept as
	 * it is, and its response is NULL.
	 */
	plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("could not prepare the statement given to idem_execute: %s",
						SPI_result_code_string(SPI_result)),
				 IdemErrdetailKey(a->key, a->scope),
				 errhint("The statement must be one SELECT, INSERT, UPDATE or DELETE, with parameters $1, $2, ...")));
	if (StatementReturnsRows(plan, a))
	{
		SPI_freeplan(plan);
		/* a trailing semicolon would end the wrapper's CTE early */
		len = strlen(sql);
		while (len > 0 && (sql[len - 1] == ';' || isspace((unsigned char) sql[len - 1])))
			len--;
		wrapped = psprintf("WITH idem_result AS (%.*s) "
						   "SELECT pg_catalog.to_jsonb(idem_result.*) FROM idem_result",
						   len, sql);
		plan = SPI_prepare(wrapped, nargs, argtypes);
		if (plan == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("could not prepare the statement given to idem_execute: %s",
							SPI_result_code_string(SPI_result))));
	}
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");

	/* round robin: replace the oldest entry */
	slot = &exec_cache[exec_cache_next];
	exec_cache_next = (exec_cache_next + 1) % EXEC_CACHE_SIZE;
	if (slot->plan != NULL)
	{
		SPI_freeplan(slot->plan);
		pfree(slot->sql);
	}
	slot->sql = MemoryContextStrdup(TopMemoryContext, sql);
	slot->nargs = nargs;
	memcpy(slot->argtypes, argtypes, sizeof(Oid) * nargs);
	slot->plan = plan;
	return plan;
}

/*
 * Collect the statement's arguments: the variadic tail of the call, or the
 * elements of the array given with VARIADIC.  Literals of unknown type are
 * passed as text.
 */
static int
StatementArgs(FunctionCallInfo fcinfo, Datum *values, char *nulls, Oid *types)
{
	int			nargs = 0;

	if (PG_NARGS() <= EXEC_FIXED_ARGS)
		return 0;

	if (get_fn_expr_variadic(fcinfo->flinfo))
	{
		ArrayType  *arr;
		Oid			elemtype;
		int16		typlen;
		bool		typbyval;
		char		typalign;
		Datum	   *elems;
		bool	   *elemnulls;

		if (PG_ARGISNULL(EXEC_FIXED_ARGS))
			return 0;
		arr = PG_GETARG_ARRAYTYPE_P(EXEC_FIXED_ARGS);
		elemtype = ARR_ELEMTYPE(arr);
		get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
		deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
						  &elems, &elemnulls, &nargs);
		if (nargs > FUNC_MAX_ARGS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("idem_execute takes at most %d statement arguments", FUNC_MAX_ARGS)));
		for (int i = 0; i < nargs; i++)
		{
			values[i] = elems[i];
			nulls[i] = elemnulls[i] ? 'n' : ' ';
			types[i] = elemtype;
		}
		return nargs;
	}

	for (int i = EXEC_FIXED_ARGS; i < PG_NARGS(); i++, nargs++)
	{
		Oid			type = get_fn_expr_argtype(fcinfo->flinfo, i);

		if (!OidIsValid(type))
			elog(ERROR, "could not determine the type of argument %d", i + 1);
		nulls[nargs] = PG_ARGISNULL(i) ? 'n' : ' ';
		values[nargs] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		if (type == UNKNOWNOID)
		{
			type = TEXTOID;
			if (!PG_ARGISNULL(i))
				values[nargs] = CStringGetTextDatum(DatumGetCString(values[nargs]));
		}
		types[nargs] = type;
	}
	return nargs;
}

/*
 * idem_execute(key, request, scope, success_code, query, VARIADIC args)
 */
Datum
idem_execute(PG_FUNCTION_ARGS)
{
	IdemClaimArgs a;
	TupleDesc	desc;
	MemoryContext callcxt = CurrentMemoryContext;
	Datum		values[IDEM_CLAIM_NCOLUMNS];
	bool		nulls[IDEM_CLAIM_NCOLUMNS];
	Datum		stmt_values[FUNC_MAX_ARGS];
	char		stmt_nulls[FUNC_MAX_ARGS];
	Oid			stmt_types[FUNC_MAX_ARGS];
	int			stmt_nargs;
	const char *outcome;
	char	   *sql;
	int			level;
	SPIPlanPtr	plan;
	Datum		response = (Datum) 0;
	Datum		args[6];
	char		argnulls[6];

	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("statement must not be null"),
				 errhint("Pass the statement that does the work, such as the payment's INSERT.")));
	sql = text_to_cstring(PG_GETARG_TEXT_PP(4));
	stmt_nargs = StatementArgs(fcinfo, stmt_values, stmt_nulls, stmt_types);

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	desc = BlessTupleDesc(desc);

	level = PinSearchPath();
	IdemClaimArgsFrom(fcinfo, "idem_execute", 0, 1, 2, NULL, NULL, true, &a);

	SPI_connect();
	outcome = IdemClaim(&a, desc, callcxt, values, nulls);
	AtEOXact_GUC(true, level);

	if (strcmp(outcome, "new") != 0 && strcmp(outcome, "reclaimed") != 0)
	{
		SPI_finish();
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
	}

	/* The work, under the caller's search_path and privileges */
	plan = StatementPlan(sql, stmt_nargs, stmt_types, &a);
	if (SPI_execute_plan(plan, stmt_values, stmt_nulls, false, 2) < 0)
		elog(ERROR, "SPI_execute_plan failed");
	/* a statement without result rows (DML without RETURNING): no response */
	if (SPI_tuptable == NULL)
		SPI_processed = 0;
	if (SPI_processed > 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("statement given to idem_execute returned more than one row"),
				 IdemErrdetailKey(a.key, a.scope),
				 errhint("Its result row is the stored response; return one row, or none.")));
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
		{
			/* the response must outlive SPI_finish */
			MemoryContext old = MemoryContextSwitchTo(callcxt);

			response = PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
			MemoryContextSwitchTo(old);
		}
	}

	/* Record the result: complete the claim with its token */
	level = PinSearchPath();
	args[0] = PointerGetDatum(a.scope);
	args[1] = PointerGetDatum(a.key);
	args[2] = values[CLAIM_TOKEN];
	args[3] = TimestampTzGetDatum(GetCurrentTimestamp());
	args[4] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	args[5] = response;
	memset(argnulls, ' ', sizeof(argnulls));
	argnulls[4] = PG_ARGISNULL(3) ? 'n' : ' ';
	argnulls[5] = response ? ' ' : 'n';
	if (IdemExecute(IDEM_STMT_COMPLETE, a.nspid, args, argnulls, false, 0) == 0)
		elog(ERROR, "claim of idempotency key vanished during idem_execute");
	values[CLAIM_STATUS] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										 1, &nulls[CLAIM_STATUS]);
	AtEOXact_GUC(true, level);
	SPI_finish();
	IdemStatsAdd(IDEM_STAT_COMPLETE, 1);

	values[CLAIM_RESPONSE_CODE] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[CLAIM_RESPONSE_CODE] = PG_ARGISNULL(3);
	values[CLAIM_RESPONSE] = response;
	nulls[CLAIM_RESPONSE] = (response == (Datum) 0);
	nulls[CLAIM_RETRY_AFTER] = true;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
