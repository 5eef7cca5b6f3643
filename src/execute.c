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
 * A key that has no row takes a shorter path that writes the key row once:
 * the statement runs in a subtransaction, then the row is inserted already
 * completed, with its response.  If a concurrent request claimed the key
 * first, that INSERT waits for it and fails on the primary key, or the
 * statement itself fails on a unique index or a deadlock it shares with
 * that request; then the subtransaction is rolled back, the statement's
 * work with it, and the call goes the general way below, which finds the
 * other request's row (replay, in_progress, or new if it rolled back).  So
 * a concurrent duplicate's statement may start, and be undone, but only one
 * commits.  Against the general way this saves the UPDATE of the key row:
 * its executor start-up, its new tuple and its index entries (WAL).  The
 * price is a subtransaction, so a second transaction id; at most
 * EXEC_MAX_SUBXACTS of them per transaction, after which the general way
 * is used, so that idem_execute never overflows the subtransaction cache.
 *
 * Any other key (a row is there) goes the explicit pattern's way inside
 * the server: claim, statement, complete, without the round trips between
 * them.
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
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "compat.h"
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
 * New keys written the short way per transaction, each in a subtransaction
 * of its own; half the 64 subtransactions PostgreSQL caches per backend,
 * leaving room for the application's own savepoints.
 */
#define EXEC_MAX_SUBXACTS 32

static LocalTransactionId exec_subxacts_lxid = InvalidLocalTransactionId;
static int	exec_subxacts = 0;

/* The caller's statement and its arguments */
typedef struct ExecStatement
{
	SPIPlanPtr	plan;
	int			nargs;
	Datum		values[FUNC_MAX_ARGS];
	char		nulls[FUNC_MAX_ARGS];
	Oid			types[FUNC_MAX_ARGS];
} ExecStatement;

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
 * Run the caller's statement, under the caller's search_path, and return
 * its result row as jsonb, copied into callcxt ((Datum) 0 for none).
 */
static Datum
RunStatement(ExecStatement *st, IdemClaimArgs *a, MemoryContext callcxt)
{
	Datum		response = (Datum) 0;

	if (SPI_execute_plan(st->plan, st->values, st->nulls, false, 2) < 0)
		elog(ERROR, "SPI_execute_plan failed");
	/* a statement without result rows (DML without RETURNING): no response */
	if (SPI_tuptable == NULL)
		SPI_processed = 0;
	if (SPI_processed > 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("statement given to idem_execute returned more than one row"),
				 IdemErrdetailKey(a->key, a->scope),
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
	return response;
}

/* A text value of a C string, allocated in mcxt */
static text *
MemoryContextStrdupText(MemoryContext mcxt, const char *str)
{
	MemoryContext old = MemoryContextSwitchTo(mcxt);
	text	   *result = cstring_to_text(str);

	MemoryContextSwitchTo(old);
	return result;
}

/* An int8 Datum allocated in mcxt if int8 is passed by reference there */
static Datum
Int64DatumInContext(MemoryContext mcxt, int64 value)
{
	MemoryContext old = MemoryContextSwitchTo(mcxt);
	Datum		result = Int64GetDatum(value);

	MemoryContextSwitchTo(old);
	return result;
}

/* May this transaction start one more subtransaction for a new key? */
static bool
NewKeySubxactAllowed(void)
{
	if (exec_subxacts_lxid != IdemCurrentLxid())
	{
		exec_subxacts_lxid = IdemCurrentLxid();
		exec_subxacts = 0;
	}
	return exec_subxacts < EXEC_MAX_SUBXACTS;
}

/*
 * A key without a row: run the statement and insert the key row completed,
 * in a subtransaction (see the top of the file).  Returns true with the
 * result in values/nulls, or false, having undone everything, when a
 * concurrent claim of the key got there first (or the statement failed on
 * a unique index or a deadlock).  Must be called inside SPI.
 */
static bool
ExecuteNewKey(IdemClaimArgs *a, ExecStatement *st, Datum code, bool code_null,
			  MemoryContext callcxt, Datum *values, bool *nulls)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool inserted = false;
	volatile Datum response = (Datum) 0;
	volatile int64 token = 0;
	volatile Datum status = (Datum) 0;

	exec_subxacts++;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		Datum		args[7];
		char		argnulls[7];
		int			level;

		response = RunStatement(st, a, callcxt);

		level = PinSearchPath();
		memset(argnulls, ' ', sizeof(argnulls));
		args[0] = PointerGetDatum(a->scope);
		args[1] = PointerGetDatum(a->key);
		args[2] = a->hash ? PointerGetDatum(a->hash) : (Datum) 0;
		argnulls[2] = a->hash ? ' ' : 'n';
		args[3] = TimestampTzGetDatum(GetCurrentTimestamp());
		args[4] = IntervalPGetDatum(a->retention);
		args[5] = code;
		argnulls[5] = code_null ? 'n' : ' ';
		args[6] = response;
		argnulls[6] = response ? ' ' : 'n';
		if (IdemExecute(IDEM_STMT_INSERT_COMPLETED, a->nspid, args, argnulls, false, 0) != 1)
			elog(ERROR, "INSERT of idempotency key did not return its row");
		{
			bool		isnull;

			token = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
			status = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								   2, &isnull);
		}
		AtEOXact_GUC(true, level);

		ReleaseCurrentSubTransaction();
		inserted = true;
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		/*
		 * The key's primary key, or a unique index or a deadlock shared
		 * with a concurrent request of the same key: the general way finds
		 * out which.  If it had nothing to do with the key, the statement
		 * runs again there and fails again, as the caller's error.
		 */
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION &&
			edata->sqlerrcode != ERRCODE_T_R_DEADLOCK_DETECTED)
			ReThrowError(edata);
		FreeErrorData(edata);
		inserted = false;
	}
	PG_END_TRY();

	if (!inserted)
		return false;

	/* the enum status is passed by value; the rest must outlive SPI_finish */
	values[CLAIM_OUTCOME] = PointerGetDatum(MemoryContextStrdupText(callcxt, "new"));
	nulls[CLAIM_OUTCOME] = false;
	values[CLAIM_TOKEN] = Int64DatumInContext(callcxt, token);
	nulls[CLAIM_TOKEN] = false;
	values[CLAIM_STATUS] = status;
	nulls[CLAIM_STATUS] = false;
	values[CLAIM_RESPONSE_CODE] = code;
	nulls[CLAIM_RESPONSE_CODE] = code_null;
	values[CLAIM_RESPONSE] = response;
	nulls[CLAIM_RESPONSE] = (response == (Datum) 0);
	IdemStatsAdd(IDEM_STAT_CLAIM_NEW, 1);
	IdemStatsAdd(IDEM_STAT_COMPLETE, 1);
	return true;
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
	ExecStatement st;
	const char *outcome;
	char	   *sql;
	int			level;
	bool		code_null = PG_ARGISNULL(3);
	Datum		code = code_null ? (Datum) 0 : PG_GETARG_DATUM(3);
	Datum		response;
	Datum		args[6];
	char		argnulls[6];

	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("statement must not be null"),
				 errhint("Pass the statement that does the work, such as the payment's INSERT.")));
	sql = text_to_cstring(PG_GETARG_TEXT_PP(4));
	st.nargs = StatementArgs(fcinfo, st.values, st.nulls, st.types);

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	desc = BlessTupleDesc(desc);

	level = PinSearchPath();
	IdemClaimArgsFrom(fcinfo, "idem_execute", 0, 1, 2, NULL, NULL, true, &a);

	SPI_connect();
	a.probe = NewKeySubxactAllowed();
	outcome = IdemClaim(&a, desc, callcxt, values, nulls);
	AtEOXact_GUC(true, level);

	if (outcome == NULL)
	{
		/* no row: the short way, unless a concurrent claim got there first */
		st.plan = StatementPlan(sql, st.nargs, st.types, &a);
		if (ExecuteNewKey(&a, &st, code, code_null, callcxt, values, nulls))
		{
			SPI_finish();
			PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
		}
		a.probe = false;
		level = PinSearchPath();
		outcome = IdemClaim(&a, desc, callcxt, values, nulls);
		AtEOXact_GUC(true, level);
	}

	if (strcmp(outcome, "new") != 0 && strcmp(outcome, "reclaimed") != 0)
	{
		SPI_finish();
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
	}

	/* The work, under the caller's search_path and privileges */
	st.plan = StatementPlan(sql, st.nargs, st.types, &a);
	response = RunStatement(&st, &a, callcxt);

	/* Record the result: complete the claim with its token */
	level = PinSearchPath();
	args[0] = PointerGetDatum(a.scope);
	args[1] = PointerGetDatum(a.key);
	args[2] = values[CLAIM_TOKEN];
	args[3] = TimestampTzGetDatum(GetCurrentTimestamp());
	args[4] = code;
	args[5] = response;
	memset(argnulls, ' ', sizeof(argnulls));
	argnulls[4] = code_null ? 'n' : ' ';
	argnulls[5] = response ? ' ' : 'n';
	if (IdemExecute(IDEM_STMT_COMPLETE, a.nspid, args, argnulls, false, 0) == 0)
		elog(ERROR, "claim of idempotency key vanished during idem_execute");
	values[CLAIM_STATUS] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										 1, &nulls[CLAIM_STATUS]);
	AtEOXact_GUC(true, level);
	SPI_finish();
	IdemStatsAdd(IDEM_STAT_COMPLETE, 1);

	values[CLAIM_RESPONSE_CODE] = code;
	nulls[CLAIM_RESPONSE_CODE] = code_null;
	values[CLAIM_RESPONSE] = response;
	nulls[CLAIM_RESPONSE] = (response == (Datum) 0);
	nulls[CLAIM_RETRY_AFTER] = true;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
