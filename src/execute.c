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
 * with the key's lock (claim.c), the statement runs in a subtransaction,
 * then the row is inserted already completed, with its response.  If
 * another transaction holds the key's lock, it is writing the key: the
 * call waits for the lock and goes the general way below, which finds that
 * transaction's row (replay, in_progress, or new if it rolled back).  A
 * concurrent claim that holds no lock (a batch past its lock limit) makes
 * the INSERT wait for it and fail on the primary key, or the statement
 * fail on a unique index or a deadlock it shares with that claim; then the
 * subtransaction is rolled back, the statement's work with it, and the call
 * goes the general way too.  So only one statement commits.  When the
 * statement itself failed and the general way's claim then finds the key
 * free to run it (new or reclaimed: no concurrent claim explains the
 * error, a unique index the key has nothing to do with), the call fails
 * with the statement's error, run once.  Against the
 * general way this saves the UPDATE of the key row: its executor start-up,
 * its new tuple and its index entries (WAL).  The price is a
 * subtransaction, so a second transaction id; at most EXEC_MAX_SUBXACTS of
 * them per transaction, after which the general way is used, so that
 * idem_execute never overflows the subtransaction cache.  The short way is
 * taken only when writing the key's row cannot be refused to the caller
 * (INSERT privilege, no row level security): otherwise the claim is written
 * first, so that a scope the caller may not use is refused before its
 * statement starts.
 *
 * Any other key (a row is there) goes the explicit pattern's way inside
 * the server: claim, statement, complete, without the round trips between
 * them.
 *
 * The caller's statement must resolve names as the caller wrote it, so this
 * function has no SET search_path clause; instead the extension's own
 * statements run under a pinned search_path (pg_catalog, pg_temp) set and
 * reset around them, and the caller's statement runs under the caller's.
 *
 * The statement must be one SELECT, INSERT, UPDATE or DELETE, which is
 * checked on its parse tree when it is prepared; anything else (utility
 * statements, SELECT INTO, EXECUTE of a prepared statement) is refused
 * before it runs.  It runs exactly as given, and its result row becomes
 * the response through to_jsonb, applied here to the row it actually
 * returned: nothing about the result's shape is decided in advance.
 *
 * Caller statements are prepared once per backend and kept in a small
 * cache keyed by their text and argument types.  The statement of an
 * idem_execute can itself call idem_execute, so an entry is pinned while its
 * statement runs, and a pinned entry is never evicted (when every entry is
 * pinned, the new statement is prepared for this call only).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/rls.h"
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
#include "common.h"
#include "store.h"
#include "input.h"
#include "claim.h"
#include "keylock.h"
#include "stats.h"
#include "settings.h"

PG_FUNCTION_INFO_V1(idem_execute);

/* Arguments of idem_execute before the statement's own */
#define EXEC_FIXED_ARGS 5

/* Statements kept prepared per backend */
#define EXEC_CACHE_SIZE 16

typedef struct ExecPlan
{
	char	   *sql;			/* the caller's text, in IdemCacheContext() */
	int			nargs;
	Oid			argtypes[FUNC_MAX_ARGS];
	SPIPlanPtr	plan;
	int			options;		/* cursor options it was prepared with */
	int			pins;			/* calls running it now (nested calls) */
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
	ExecPlan   *plan;
	int			nargs;
	Datum		values[FUNC_MAX_ARGS];
	char		nulls[FUNC_MAX_ARGS];
	Oid			types[FUNC_MAX_ARGS];
} ExecStatement;

/* Is a statement of this kind one idem_execute runs? */
static inline bool
AllowedKind(CmdType type)
{
	return type == CMD_SELECT || type == CMD_INSERT ||
		type == CMD_UPDATE || type == CMD_DELETE;
}

/* Refuse a statement of another kind (0A000), named by its command tag */
static void
ReportKind(CommandTag tag, bool rewritten, IdemClaimArgs *a)
{
	char	   *key = IdemKeyForMessage(a->key);
	char	   *scope = IdemKeyForMessage(a->scope);

	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("idem_execute runs only SELECT, INSERT, UPDATE and DELETE statements"),
			 rewritten ?
			 errdetail("The statement given for key \"%s\" in scope \"%s\" is rewritten into %s by a rule.",
					   key, scope, GetCommandTagName(tag)) :
			 errdetail("The statement given for key \"%s\" in scope \"%s\" is %s.",
					   key, scope, GetCommandTagName(tag)),
			 errhint("Run other statements yourself, around the explicit pattern idem_claim, then idem_complete.")));
}

/*
 * Refuse anything but one SELECT, INSERT, UPDATE or DELETE, by its parse
 * tree and by what the rewriter made of it (SELECT INTO becomes a utility
 * statement there).
 */
static void
CheckStatementKind(SPIPlanPtr plan, IdemClaimArgs *a)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);
	CachedPlanSource *source;
	Node	   *stmt;
	CommandTag	tag;
	ListCell   *lc;

	if (list_length(sources) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("statement given to idem_execute must be a single statement"),
				 IdemErrdetailKey(a->key, a->scope)));
	source = (CachedPlanSource *) linitial(sources);
	tag = source->commandTag;
	stmt = source->raw_parse_tree ? source->raw_parse_tree->stmt : NULL;
	if (stmt != NULL &&
		(IsA(stmt, SelectStmt) || IsA(stmt, InsertStmt) ||
		 IsA(stmt, UpdateStmt) || IsA(stmt, DeleteStmt)))
		tag = CMDTAG_UNKNOWN;	/* allowed, unless rewritten into another kind */
	foreach(lc, source->query_list)
	{
		Query	   *query = lfirst_node(Query, lc);

		if (query->utilityStmt != NULL)
			tag = CreateCommandTag(query->utilityStmt);
		else if (!AllowedKind(query->commandType))
			tag = source->commandTag;
	}
	if (tag != CMDTAG_UNKNOWN)
		ReportKind(tag, false, a);
}

/* Prepare the caller's statement and check its kind; not yet kept. */
static SPIPlanPtr
PrepareStatement(const char *sql, int nargs, Oid *argtypes, IdemClaimArgs *a)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes, IdemPlanOptions(a->nspid));

	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("could not prepare the statement given to idem_execute: %s",
						SPI_result_code_string(SPI_result)),
				 IdemErrdetailKey(a->key, a->scope),
				 errhint("The statement must be one SELECT, INSERT, UPDATE or DELETE, with parameters $1, $2, ...")));
	CheckStatementKind(plan, a);
	return plan;
}

/*
 * The cache slot to fill next: the oldest that is not pinned, emptied; or
 * NULL when every slot is pinned by calls running now.
 */
static ExecPlan *
EvictableSlot(void)
{
	for (int i = 0; i < EXEC_CACHE_SIZE; i++)
	{
		ExecPlan   *slot = &exec_cache[exec_cache_next];

		exec_cache_next = (exec_cache_next + 1) % EXEC_CACHE_SIZE;
		if (slot->pins > 0)
			continue;
		if (slot->plan != NULL)
		{
			SPI_freeplan(slot->plan);
			pfree(slot->sql);
			slot->plan = NULL;
		}
		return slot;
	}
	return NULL;
}

/*
 * The prepared statement for the caller's text and argument types: a cache
 * entry, or, when every entry is pinned, one in memory (SPI's) that lasts
 * for this call only.  Must be called inside SPI.
 */
static ExecPlan *
StatementPlan(const char *sql, int nargs, Oid *argtypes, IdemClaimArgs *a)
{
	ExecPlan   *slot;
	SPIPlanPtr	plan;
	int			options = IdemPlanOptions(a->nspid);

	for (int i = 0; i < EXEC_CACHE_SIZE; i++)
	{
		ExecPlan   *p = &exec_cache[i];

		if (p->plan != NULL && p->nargs == nargs && p->options == options &&
			strcmp(p->sql, sql) == 0 &&
			memcmp(p->argtypes, argtypes, sizeof(Oid) * nargs) == 0)
			return p;
	}

	plan = PrepareStatement(sql, nargs, argtypes, a);
	slot = EvictableSlot();
	if (slot == NULL)
	{
		slot = palloc0(sizeof(ExecPlan));
		slot->plan = plan;
		return slot;
	}
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	slot->sql = MemoryContextStrdup(IdemCacheContext(), sql);
	slot->nargs = nargs;
	memcpy(slot->argtypes, argtypes, sizeof(Oid) * nargs);
	slot->plan = plan;
	slot->options = options;
	return slot;
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
 * to_jsonb(record), called from C: the function with an expression that
 * tells it its argument is a record, so that it reads the row type from
 * each row it is given.
 */
static FmgrInfo *
ToJsonbRecord(void)
{
	static FmgrInfo *finfo = NULL;

	if (finfo == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(IdemCacheContext());
		FmgrInfo   *f = palloc0(sizeof(FmgrInfo));
		Node	   *arg = (Node *) makeNullConst(RECORDOID, -1, InvalidOid);

		fmgr_info_cxt(F_TO_JSONB, f, IdemCacheContext());
		fmgr_info_set_expr((Node *) makeFuncExpr(F_TO_JSONB, JSONBOID, list_make1(arg),
												 InvalidOid, InvalidOid,
												 COERCE_EXPLICIT_CALL), f);
		MemoryContextSwitchTo(old);
		finfo = f;
	}
	return finfo;
}

/* A result row as jsonb, exactly what to_jsonb makes of it */
static Datum
RowToJsonb(HeapTuple tuple, TupleDesc desc)
{
	desc = BlessTupleDesc(desc);
	return FunctionCall1(ToJsonbRecord(), heap_copy_tuple_as_datum(tuple, desc));
}

/*
 * Check the statement's kind again as it will run now: a rule created
 * since it was prepared (DO INSTEAD NOTIFY on a table it writes) rewrites
 * it when its plan is revalidated.  Getting the plan revalidates it and
 * locks what it reads and writes until the transaction ends, so no rule can
 * change it again before it runs.
 */
static void
CheckPlannedKind(ExecPlan *ep, IdemClaimArgs *a)
{
	ResourceOwner owner = ep->sql != NULL ? CurrentResourceOwner : NULL;
	CachedPlan *cplan = SPI_plan_get_cached_plan(ep->plan);
	CommandTag	tag = CMDTAG_UNKNOWN;
	ListCell   *lc;

	foreach(lc, cplan->stmt_list)
	{
		PlannedStmt *stmt = lfirst_node(PlannedStmt, lc);

		if (stmt->utilityStmt != NULL)
			tag = CreateCommandTag(stmt->utilityStmt);
		else if (!AllowedKind(stmt->commandType))
			tag = CMDTAG_MERGE;
	}
	ReleaseCachedPlan(cplan, owner);
	if (tag != CMDTAG_UNKNOWN)
		ReportKind(tag, true, a);
}

/*
 * Run the caller's statement, under the caller's search_path, and return
 * its result row as jsonb ((Datum) 0 for none), in SPI's memory.
 */
static Datum
RunStatement(ExecStatement *st, IdemClaimArgs *a)
{
	Datum		response = (Datum) 0;
	int			rc;

	CheckPlannedKind(st->plan, a);
	rc = IdemRunPlan(st->plan->plan, st->values, st->nulls, false, 2);
	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));

	/* a statement without result rows (DML without RETURNING): no response */
	if (SPI_tuptable == NULL)
		return (Datum) 0;
	if (SPI_processed > 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("statement given to idem_execute returned more than one row"),
				 IdemErrdetailKey(a->key, a->scope),
				 errhint("Its result row is the stored response; return one row, or none.")));
	if (SPI_processed == 1)
	{
		response = RowToJsonb(SPI_tuptable->vals[0], SPI_tuptable->tupdesc);
		IdemCheckResponse(response, a->key, a->scope);
	}
	return response;
}

/* The response code and response to store ((Datum) 0: no response) */
static void
SetResponseArgs(IdemArgs *args, Datum code, bool code_null, Datum response)
{
	if (code_null)
		IdemArgNull(args, IDEM_PARAM_RESPONSE_CODE);
	else
		IdemArg(args, IDEM_PARAM_RESPONSE_CODE, code);
	IdemArgPtr(args, IDEM_PARAM_RESPONSE, DatumGetPointer(response));
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

typedef struct NewKey
{
	IdemClaimArgs *a;
	ExecStatement *st;
	Datum		code;
	bool		code_null;
	Datum		response;		/* set by NewKeyBody */
	int64		token;			/* set by NewKeyBody */
	bool		ran;			/* set by NewKeyBody: the statement returned */
} NewKey;

/* ExecuteNewKey's subtransaction: the statement, then the key row */
static void
NewKeyBody(void *arg)
{
	NewKey	   *n = (NewKey *) arg;
	IdemClaimArgs *a = n->a;
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);
	int			level;

	n->response = RunStatement(n->st, a);
	n->ran = true;

	level = IdemPinSearchPath();
	/* the times, after the statement */
	a->now = IdemStampArgs(&a->stamp, IDEM_STMT_INSERT_COMPLETED, a->nspid, &args);
	IdemArgPtr(&args, IDEM_PARAM_REQUEST_HASH, a->hash);
	IdemArg(&args, IDEM_PARAM_EXPIRES_AT,
			TimestampTzGetDatum(IdemTimePlus(a->now, a->retention)));
	SetResponseArgs(&args, n->code, n->code_null, n->response);
	n->token = IdemNextToken(a->nspid);
	IdemArg(&args, IDEM_PARAM_NEW_TOKEN, Int64GetDatum(n->token));
	if (IdemExecute(IDEM_STMT_INSERT_COMPLETED, a->nspid, &args, false, 0) != 1)
		elog(ERROR, "INSERT of idempotency key did not insert its row");
	IdemUnpinSearchPath(level);
}

/*
 * A key without a row: run the statement and insert the key row completed,
 * in a subtransaction (see the top of the file).  Returns true with the
 * result in values/nulls, or false, having undone everything, when a
 * concurrent claim of the key got there first (or the statement failed on
 * a unique index or a deadlock).  Must be called inside SPI.
 *
 * The key's primary key, or a unique index or a deadlock shared with a
 * concurrent request of the same key: the general way finds out which.
 * When the statement itself failed, its error is handed back in
 * *stmt_error: if the general way's claim then finds the key free to run
 * it (new or reclaimed), nothing concurrent explained the error, which is
 * raised as the caller's, the statement never run a second time (its
 * effects outside the database, a sequence's values, happen once a call).
 */
static bool
ExecuteNewKey(IdemClaimArgs *a, ExecStatement *st, Datum code, bool code_null,
			  Oid status_typid, Datum *values, bool *nulls,
			  ErrorData **stmt_error)
{
	static const int caught[] = {ERRCODE_UNIQUE_VIOLATION, ERRCODE_T_R_DEADLOCK_DETECTED, 0};
	NewKey		n = {a, st, code, code_null, (Datum) 0, 0, false};
	ErrorData  *edata = NULL;

	exec_subxacts++;
	if (IdemRunInSubtransaction(NewKeyBody, &n, caught, &edata) != 0)
	{
		if (n.ran)
			FreeErrorData(edata);	/* the key row's INSERT: a concurrent claim */
		else
			*stmt_error = edata;
		return false;
	}

	values[CLAIM_OUTCOME] = CStringGetTextDatum(IdemOutcomeName(IDEM_OUTCOME_NEW));
	nulls[CLAIM_OUTCOME] = false;
	values[CLAIM_TOKEN] = Int64GetDatum(n.token);
	nulls[CLAIM_TOKEN] = false;
	values[CLAIM_STATUS] = IdemStatusValue(status_typid, IDEM_COMPLETED);
	nulls[CLAIM_STATUS] = false;
	values[CLAIM_RESPONSE_CODE] = code;
	nulls[CLAIM_RESPONSE_CODE] = code_null;
	values[CLAIM_RESPONSE] = n.response;
	nulls[CLAIM_RESPONSE] = (n.response == (Datum) 0);
	IdemStatsAdd(IDEM_STAT_CLAIM_NEW, 1);
	IdemStatsAdd(IDEM_STAT_COMPLETE, 1);
	return true;
}

/*
 * The claim of an idem_execute was taken from under its statement: the
 * statement deleted or changed the key's row.
 */
static void
ReportClaimLost(IdemClaimArgs *a)
{
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);
	bool		gone;

	gone = IdemExecute(IDEM_STMT_SELECT, a->nspid, &args, false, 1) == 0;
	ereport(ERROR,
			(errcode(gone ? ERRCODE_IDEM_KEY_NOT_FOUND : ERRCODE_IDEM_NOT_PROCESSING),
			 errmsg("the statement given to idem_execute %s its own idempotency key",
					gone ? "deleted" : "changed"),
			 IdemErrdetailKey(a->key, a->scope),
			 errhint("The statement must not write the idempotency_keys row of the key it runs under.")));
}

/*
 * Complete the claim with the statement's result.  Must be called inside
 * SPI.
 */
static void
CompleteClaim(IdemClaimArgs *a, Datum token, Datum code, bool code_null,
			  Datum response)
{
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);
	int			level = IdemPinSearchPath();

	IdemArg(&args, IDEM_PARAM_TOKEN, token);
	/* the claim's row, written again: the call's span starts here (stamp.c) */
	(void) IdemStampArgs(&a->stamp, IDEM_STMT_COMPLETE, a->nspid, &args);
	SetResponseArgs(&args, code, code_null, response);
	if (IdemExecute(IDEM_STMT_COMPLETE, a->nspid, &args, false, 0) == 0)
		ReportClaimLost(a);
	IdemUnpinSearchPath(level);
	IdemStatsAdd(IDEM_STAT_COMPLETE, 1);
}

/*
 * May the caller's statement run before the key's row is written (the
 * short way)?  Only when writing that row cannot then be refused to this
 * role: it has INSERT on the table and no row level security applies to
 * it.  Otherwise the claim is written first, so that a scope the role may
 * not use is refused before its statement runs.
 */
static bool
KeyRowWriteCertain(Oid nspid)
{
	Oid			relid = IdemKeysRelid(nspid);

	return pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) == ACLCHECK_OK &&
		!IdemRlsApplies(nspid);
}

/*
 * Claim, run and record, with the statement prepared (and pinned); fills
 * values/nulls.  Must be called inside SPI, with the extension's
 * search_path not pinned.
 */
static void
ExecuteClaimed(IdemClaimArgs *a, ExecStatement *st, Datum code, bool code_null,
			   TupleDesc desc, Datum *values, bool *nulls)
{
	IdemOutcome outcome;
	int			level;
	Datum		response;
	bool		locked = false;
	ErrorData  *stmt_error = NULL;

	/*
	 * No row: the short way, with the key's lock, unless another
	 * transaction holds that lock (it is writing the key: wait for it, then
	 * go the general way) or a concurrent claim got there first.
	 */
	level = IdemPinSearchPath();
	a->probe = NewKeySubxactAllowed() && KeyRowWriteCertain(a->nspid);
	outcome = IdemClaim(a, desc, values, nulls);
	if (outcome == IDEM_OUTCOME_NONE)
		locked = IdemLockKey(a, false);
	IdemUnpinSearchPath(level);
	if (locked && ExecuteNewKey(a, st, code, code_null,
								TupleDescAttr(desc, CLAIM_STATUS)->atttypid,
								values, nulls, &stmt_error))
		return;

	if (outcome == IDEM_OUTCOME_NONE)
	{
		level = IdemPinSearchPath();
		if (!locked)
			(void) IdemLockKey(a, true);
		a->probe = false;
		outcome = IdemClaim(a, desc, values, nulls);
		IdemUnpinSearchPath(level);
	}
	if (outcome != IDEM_OUTCOME_NEW && outcome != IDEM_OUTCOME_RECLAIMED)
	{
		if (stmt_error != NULL)
			FreeErrorData(stmt_error);
		return;
	}
	/* the short way's statement failed, and nothing concurrent explains it */
	if (stmt_error != NULL)
		ReThrowError(stmt_error);

	/* The work, under the caller's search_path and privileges */
	response = RunStatement(st, a);
	CompleteClaim(a, values[CLAIM_TOKEN], code, code_null, response);
	values[CLAIM_STATUS] = IdemStatusValue(TupleDescAttr(desc, CLAIM_STATUS)->atttypid,
										   IDEM_COMPLETED);
	values[CLAIM_RESPONSE_CODE] = code;
	nulls[CLAIM_RESPONSE_CODE] = code_null;
	values[CLAIM_RESPONSE] = response;
	nulls[CLAIM_RESPONSE] = (response == (Datum) 0);
	nulls[CLAIM_RETRY_AFTER] = true;
}

/*
 * idem_execute(key, request, scope, success_code, query, VARIADIC args)
 *
 * The statement is prepared, and its kind checked, before anything is
 * claimed; its cache entry stays pinned until the call ends, since the
 * statement (or a trigger) may call idem_execute again.
 */
Datum
idem_execute(PG_FUNCTION_ARGS)
{
	IdemClaimArgs a;
	TupleDesc	desc;
	Datum		values[IDEM_CLAIM_NCOLUMNS];
	bool		nulls[IDEM_CLAIM_NCOLUMNS];
	ExecStatement st;
	char	   *sql;
	bool		code_null = PG_ARGISNULL(3);
	/* volatile: gcc 15 warns that PG_TRY's longjmp may clobber it */
	volatile Datum code = code_null ? (Datum) 0 : PG_GETARG_DATUM(3);
	HeapTupleHeader result;
	int			level;

	if (PG_ARGISNULL(4))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("statement must not be null"),
				 errhint("Pass the statement that does the work, such as the payment's INSERT.")));
	sql = text_to_cstring(PG_GETARG_TEXT_PP(4));
	st.nargs = StatementArgs(fcinfo, st.values, st.nulls, st.types);

	desc = IdemResultDesc(fcinfo);

	IdemClaimArgsFrom(fcinfo, "idem_execute", 0, 1, 2, NULL, NULL, true, &a);

	IdemSettingsCheck();		/* as IdemConnect, which the caller's path needs */
	SPI_connect();
	st.plan = StatementPlan(sql, st.nargs, st.types, &a);
	st.plan->pins++;
	PG_TRY();
	{
		ExecuteClaimed(&a, &st, code, code_null, desc, values, nulls);
	}
	PG_FINALLY();
	{
		st.plan->pins--;
	}
	PG_END_TRY();
	/* the times written count from after the call's last wait */
	if (IdemStampWaited(&a.stamp))
	{
		level = IdemPinSearchPath();
		(void) IdemStampEnd(&a.stamp, a.nspid);
		IdemUnpinSearchPath(level);
	}
	/* the result row, copied out of SPI's memory before SPI_finish */
	result = SPI_returntuple(heap_form_tuple(desc, values, nulls), desc);
	SPI_finish();
	PG_RETURN_HEAPTUPLEHEADER(result);
}
