/*-------------------------------------------------------------------------
 *
 * record.c
 *	  What a holder does with its claim (complete, fail, heartbeat,
 *	  checkpoint, release), what an operator does with a stuck one
 *	  (idem_resolve), and idem_lookup.
 *
 * A holder proves itself with the fencing token its claim returned.  The
 * token may be left NULL only in the transaction that made the claim
 * (store.c remembers those).  Each call is one guarded UPDATE or DELETE,
 * "WHERE token = $token AND status = 'processing'", so a holder whose key
 * was taken over changes nothing; only when it matches no row do we read
 * the row again to say why: no such key, another token, or not processing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "common.h"
#include "settings.h"
#include "store.h"
#include "input.h"
#include "claim.h"
#include "stats.h"
#include "await.h"

PG_FUNCTION_INFO_V1(idem_complete);
PG_FUNCTION_INFO_V1(idem_fail);
PG_FUNCTION_INFO_V1(idem_heartbeat);
PG_FUNCTION_INFO_V1(idem_release);
PG_FUNCTION_INFO_V1(idem_checkpoint);
PG_FUNCTION_INFO_V1(idem_resolve);
PG_FUNCTION_INFO_V1(idem_lookup);
PG_FUNCTION_INFO_V1(idem_record_batch);

/* The key a call is about, and the holder's token */
typedef struct KeyCall
{
	const char *fname;
	text	   *key;
	text	   *scope;
	bool		token_given;
	int64		token;
	Oid			nspid;
} KeyCall;

/*
 * Read and check the key and scope arguments.
 */
static void
GetKey(FunctionCallInfo fcinfo, const char *fname, int keyarg, int scopearg,
	   KeyCall *call)
{
	call->fname = fname;
	IdemGetKeyArgs(fcinfo, keyarg, scopearg, &call->key, &call->scope);
	/* a set-returning function's fn_extra belongs to funcapi */
	call->nspid = fcinfo->flinfo->fn_retset ?
		get_func_namespace(fcinfo->flinfo->fn_oid) : IdemNamespaceOf(fcinfo);
}

/*
 * Read the key, scope and token arguments of a holder's call.  A NULL
 * token stands for the one this transaction's claim of the key returned.
 */
static void
GetHolderCall(FunctionCallInfo fcinfo, const char *fname, int keyarg,
			  int scopearg, int tokenarg, KeyCall *call)
{
	GetKey(fcinfo, fname, keyarg, scopearg, call);
	PreventCommandIfReadOnly(psprintf("%s()", fname));
	call->token_given = !PG_ARGISNULL(tokenarg);
	if (call->token_given)
		call->token = PG_GETARG_INT64(tokenarg);
	else if (IdemRecallClaim(call->scope, call->key, &call->token))
		call->token_given = true;
}

/*
 * Explain why a holder's call matched no row, by ERROR.  Called inside
 * SPI after the guarded statement changed nothing.
 */
static void
ReportNoMatch(KeyCall *call)
{
	IdemArgs	args = IdemKeyArgs(call->scope, call->key);
	IdemRow		row;
	char	   *key = IdemKeyForMessage(call->key);
	char	   *scope = IdemKeyForMessage(call->scope);

	IdemExecute(IDEM_STMT_SELECT, call->nspid, &args, false, 1);
	IdemReadRow(&row, CurrentMemoryContext);

	if (!row.found)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_KEY_NOT_FOUND),
				 errmsg("idempotency key does not exist"),
				 errdetail("No key \"%s\" in scope \"%s\" (%s).", key, scope, call->fname),
				 errhint("It may have expired, been released, or been claimed in another scope.")));
	if (!call->token_given)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_TOKEN_REQUIRED),
				 errmsg("fencing token required"),
				 errdetail("Key \"%s\" in scope \"%s\" was not claimed in this transaction.", key, scope),
				 errhint("Pass the token idem_claim returned; it may be left out only in the transaction that made the claim.")));
	if (row.token != call->token)
	{
		IdemStatsAdd(IDEM_STAT_STALE_TOKEN, 1);
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_STALE_TOKEN),
				 errmsg("stale fencing token"),
				 errdetail("Key \"%s\" in scope \"%s\" is no longer held by token " INT64_FORMAT ".",
						   key, scope, call->token),
				 errhint("The lease ran out and the key was claimed again, or an operator settled it; this holder must stop.")));
	}
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_NOT_PROCESSING),
			 errmsg("idempotency key is not processing"),
			 errdetail("Key \"%s\" in scope \"%s\" is %s.", key, scope,
					   row.status_code == IDEM_COMPLETED ? "completed" : "failed"),
			 strcmp(call->fname, "idem_resolve") == 0 ?
			 errhint("An operator settles a processing key, or one the attempts limit made final.") :
			 errhint("Only a processing claim can be completed, failed, extended, checkpointed or released.")));
}

static void NowArgs(IdemArgs *args, TimestampTz now);

/*
 * Run a holder's guarded statement, with args besides the key, scope,
 * token and times; report why when it matched nothing.  Its times (now,
 * and with lease the lease's end) are taken after its plan is made, from
 * stamp when the statement writes a lease or an expiry (the caller ends the
 * stamp, IdemStampEnd, after its last statement).  Returns with SPI still
 * connected, and SPI_tuptable holding the row's locked_until for a
 * heartbeat.
 */
static void
ExecuteHolderCall(KeyCall *call, IdemStmt stmt, IdemArgs *args, Interval *lease,
				  IdemStamp *stamp)
{
	TimestampTz now;

	if (!call->token_given)
	{
		ReportNoMatch(call);	/* does not return */
		return;
	}
	IdemArg(args, IDEM_PARAM_SCOPE, PointerGetDatum(call->scope));
	IdemArg(args, IDEM_PARAM_KEY, PointerGetDatum(call->key));
	IdemArg(args, IDEM_PARAM_TOKEN, Int64GetDatum(call->token));
	if (stamp != NULL)
		now = IdemStampArgs(stamp, stmt, call->nspid, args);
	else
	{
		IdemPrepare(stmt, call->nspid);
		now = GetCurrentTimestamp();
		NowArgs(args, now);
	}
	if (lease != NULL)
	{
		TimestampTz until = IdemTimePlus(now, lease);

		IdemArg(args, IDEM_PARAM_LEASE_END, TimestampTzGetDatum(until));
		IdemArg(args, IDEM_PARAM_LEASE_END_EPOCH, Float8GetDatum(IdemEpochSeconds(until)));
	}
	if (IdemExecute(stmt, call->nspid, args, false, 0) == 0)
		ReportNoMatch(call);
}

/* A nullable argument of the call as the statement parameter p */
static void
ArgOrNull(IdemArgs *args, IdemParam p, FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		IdemArgNull(args, p);
	else
		IdemArg(args, p, PG_GETARG_DATUM(argno));
}

/* Now, as both parameters that stand for it */
static void
NowArgs(IdemArgs *args, TimestampTz now)
{
	IdemArg(args, IDEM_PARAM_NOW, TimestampTzGetDatum(now));
	IdemArg(args, IDEM_PARAM_NOW_EPOCH, Float8GetDatum(IdemEpochSeconds(now)));
}

/*
 * idem_complete(key, response_code, response, scope, token)
 */
Datum
idem_complete(PG_FUNCTION_ARGS)
{
	int			pin;
	KeyCall		call;
	IdemArgs	args = {.given = 0};
	IdemStamp	stamp;

	GetHolderCall(fcinfo, "idem_complete", 0, 3, 4, &call);
	ArgOrNull(&args, IDEM_PARAM_RESPONSE_CODE, fcinfo, 1);
	ArgOrNull(&args, IDEM_PARAM_RESPONSE, fcinfo, 2);
	if (!PG_ARGISNULL(2))
		IdemCheckResponse(PG_GETARG_DATUM(2), call.key, call.scope);

	IdemStampInit(&stamp);
	pin = IdemConnect();
	ExecuteHolderCall(&call, IDEM_STMT_COMPLETE, &args, NULL, &stamp);
	(void) IdemStampEnd(&stamp, call.nspid);
	IdemFinish(pin);
	IdemAwaitNotify(call.scope, call.key);
	IdemStatsAdd(IDEM_STAT_COMPLETE, 1);
	PG_RETURN_VOID();
}

/* The elements of a batch's array argument, or NULLs when it is NULL */
static void
BatchColumn(FunctionCallInfo fcinfo, int argno, const char *what, Oid type,
			int n, Datum **elems, bool **nulls)
{
	if (PG_ARGISNULL(argno))
	{
		*elems = palloc0(sizeof(Datum) * Max(n, 1));
		*nulls = palloc(sizeof(bool) * Max(n, 1));
		memset(*nulls, true, sizeof(bool) * Max(n, 1));
	}
	else if (IdemArrayArg(fcinfo, argno, what, type, elems, nulls) != n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must have one element per key", what)));
}

/* One key of idem_record_batch, and its place in the call */
typedef struct BatchKey
{
	KeyCall		call;
	int			index;
} BatchKey;

/* Keys in byte order, as idem_claim_batch claims them */
static int
CompareBatchKeys(const void *p, const void *q)
{
	const BatchKey *x = (const BatchKey *) p;
	const BatchKey *y = (const BatchKey *) q;
	int			c = IdemCompareKeys(x->call.key, y->call.key);

	if (c != 0)
		return c;
	return (x->index > y->index) - (x->index < y->index);
}

static void
BatchKeyContext(void *arg)
{
	const BatchKey *k = (const BatchKey *) arg;

	if (k == NULL)
		return;					/* after the keys */
	if (k->call.key == NULL)
		errcontext("key %d of the batch", k->index + 1);
	else
		errcontext("key %d of the batch, \"%s\"", k->index + 1, IdemKeyForMessage(k->call.key));
}

/*
 * idem_record_batch(keys, response_codes, responses, scope, tokens, failed,
 * retryable): idem_complete of each key, or idem_fail where failed says so,
 * in key order (as idem_claim_batch claims), all or nothing: the first key
 * that cannot be recorded raises its error (IK002 to IK005), naming it,
 * and the caller's statement fails with nothing recorded.
 */
Datum
idem_record_batch(PG_FUNCTION_ARGS)
{
	Datum	   *keys,
			   *codes,
			   *responses,
			   *tokens,
			   *failed,
			   *retryable;
	bool	   *key_nulls,
			   *code_nulls,
			   *response_nulls,
			   *token_nulls,
			   *failed_nulls,
			   *retryable_nulls;
	int64		fails = 0;
	BatchKey   *batch;
	text	   *scope;
	Oid			nspid;
	int			n;
	int			pin;
	ErrorContextCallback context;
	IdemStamp	stamp;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("keys must not be null")));
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("idempotency scope must not be null"),
				 errhint("The default scope is the empty string.")));
	scope = PG_GETARG_TEXT_PP(3);
	IdemValidateKey(scope, "scope");
	n = IdemArrayArg(fcinfo, 0, "keys", TEXTOID, &keys, &key_nulls);
	BatchColumn(fcinfo, 1, "response_codes", INT4OID, n, &codes, &code_nulls);
	BatchColumn(fcinfo, 2, "responses", JSONBOID, n, &responses, &response_nulls);
	BatchColumn(fcinfo, 4, "tokens", INT8OID, n, &tokens, &token_nulls);
	BatchColumn(fcinfo, 5, "failed", BOOLOID, n, &failed, &failed_nulls);
	BatchColumn(fcinfo, 6, "retryable", BOOLOID, n, &retryable, &retryable_nulls);
	PreventCommandIfReadOnly("idem_record_batch()");
	nspid = IdemNamespaceOf(fcinfo);

	batch = palloc0(sizeof(BatchKey) * Max(n, 1));
	context.callback = BatchKeyContext;
	context.previous = error_context_stack;
	error_context_stack = &context;
	for (int i = 0; i < n; i++)
	{
		KeyCall    *call = &batch[i].call;

		batch[i].index = i;
		context.arg = &batch[i];
		if (key_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("idempotency key must not be null"),
					 errdetail("Key %d of the batch is null.", i + 1)));
		call->fname = "idem_record_batch";
		call->key = DatumGetTextPP(keys[i]);
		call->scope = scope;
		call->nspid = nspid;
		IdemValidateKey(call->key, "key");
		if (!response_nulls[i])
			IdemCheckResponse(responses[i], call->key, scope);
		call->token_given = !token_nulls[i];
		if (call->token_given)
			call->token = DatumGetInt64(tokens[i]);
		else if (IdemRecallClaim(scope, call->key, &call->token))
			call->token_given = true;
	}
	qsort(batch, n, sizeof(BatchKey), CompareBatchKeys);

	IdemStampInit(&stamp);
	pin = IdemConnect();
	for (int i = 0; i < n; i++)
	{
		int			k = batch[i].index;
		IdemArgs	args = {.given = 0};
		bool		fail = !failed_nulls[k] && DatumGetBool(failed[k]);

		CHECK_FOR_INTERRUPTS();
		context.arg = &batch[i];
		if (code_nulls[k])
			IdemArgNull(&args, IDEM_PARAM_RESPONSE_CODE);
		else
			IdemArg(&args, IDEM_PARAM_RESPONSE_CODE, codes[k]);
		if (response_nulls[k])
			IdemArgNull(&args, IDEM_PARAM_RESPONSE);
		else
			IdemArg(&args, IDEM_PARAM_RESPONSE, responses[k]);
		if (fail)
		{
			/* retryable unless it says otherwise, as idem_fail */
			IdemArg(&args, IDEM_PARAM_RETRYABLE,
					BoolGetDatum(retryable_nulls[k] || DatumGetBool(retryable[k])));
			fails++;
		}
		ExecuteHolderCall(&batch[i].call, fail ? IDEM_STMT_FAIL : IDEM_STMT_COMPLETE, &args, NULL,
						  &stamp);
	}
	/* every expiry written counts from after the last key's wait */
	context.arg = NULL;
	(void) IdemStampEnd(&stamp, nspid);
	IdemFinish(pin);
	for (int i = 0; i < n; i++)
		IdemAwaitNotify(scope, batch[i].call.key);
	error_context_stack = context.previous;
	IdemStatsAdd(IDEM_STAT_COMPLETE, n - fails);
	IdemStatsAdd(IDEM_STAT_FAIL, fails);
	PG_RETURN_VOID();
}

/*
 * idem_fail(key, scope, token, response_code, response, retryable)
 */
Datum
idem_fail(PG_FUNCTION_ARGS)
{
	int			pin;
	KeyCall		call;
	IdemArgs	args = {.given = 0};
	IdemStamp	stamp;

	GetHolderCall(fcinfo, "idem_fail", 0, 1, 2, &call);
	if (PG_ARGISNULL(5))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("retryable must not be null"),
				 IdemErrdetailKey(call.key, call.scope)));
	ArgOrNull(&args, IDEM_PARAM_RESPONSE_CODE, fcinfo, 3);
	ArgOrNull(&args, IDEM_PARAM_RESPONSE, fcinfo, 4);
	IdemArg(&args, IDEM_PARAM_RETRYABLE, PG_GETARG_DATUM(5));
	if (!PG_ARGISNULL(4))
		IdemCheckResponse(PG_GETARG_DATUM(4), call.key, call.scope);

	IdemStampInit(&stamp);
	pin = IdemConnect();
	ExecuteHolderCall(&call, IDEM_STMT_FAIL, &args, NULL, &stamp);
	(void) IdemStampEnd(&stamp, call.nspid);
	IdemFinish(pin);
	IdemAwaitNotify(call.scope, call.key);
	IdemStatsAdd(IDEM_STAT_FAIL, 1);
	PG_RETURN_VOID();
}

/*
 * idem_heartbeat(key, scope, token, lease): returns the new lease end
 */
Datum
idem_heartbeat(PG_FUNCTION_ARGS)
{
	int			pin;
	KeyCall		call;
	IdemArgs	args = {.given = 0};
	Interval   *lease;
	TimestampTz until;
	bool		isnull;
	IdemStamp	stamp;

	GetHolderCall(fcinfo, "idem_heartbeat", 0, 1, 2, &call);
	lease = PG_ARGISNULL(3) ? IdemSecondsInterval(idem_lease_seconds) : PG_GETARG_INTERVAL_P(3);
	IdemCheckInterval(lease, "lease", GetCurrentTimestamp(), call.key, call.scope);

	IdemStampInit(&stamp);
	pin = IdemConnect();
	ExecuteHolderCall(&call, IDEM_STMT_HEARTBEAT, &args, lease, &stamp);
	/* the heartbeat's RETURNING row, or the restamp's if it moved the lease */
	(void) IdemStampEnd(&stamp, call.nspid);
	until = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											  SPI_fnumber(SPI_tuptable->tupdesc, "locked_until"),
											  &isnull));
	IdemFinish(pin);
	PG_RETURN_TIMESTAMPTZ(until);
}

/*
 * idem_release(key, scope, token): give a processing claim up
 */
Datum
idem_release(PG_FUNCTION_ARGS)
{
	int			pin;
	KeyCall		call;
	IdemArgs	args = {.given = 0};

	GetHolderCall(fcinfo, "idem_release", 0, 1, 2, &call);

	pin = IdemConnect();
	ExecuteHolderCall(&call, IDEM_STMT_RELEASE, &args, NULL, NULL);
	IdemFinish(pin);
	IdemAwaitNotify(call.scope, call.key);
	PG_RETURN_VOID();
}

/*
 * idem_checkpoint(key, recovery_point, scope, token)
 */
Datum
idem_checkpoint(PG_FUNCTION_ARGS)
{
	int			pin;
	KeyCall		call;
	IdemArgs	args = {.given = 0};

	GetHolderCall(fcinfo, "idem_checkpoint", 0, 2, 3, &call);
	ArgOrNull(&args, IDEM_PARAM_RECOVERY_POINT, fcinfo, 1);
	if (!PG_ARGISNULL(1))
		IdemCheckRecoveryPoint(PG_GETARG_TEXT_PP(1), call.key, call.scope);

	pin = IdemConnect();
	ExecuteHolderCall(&call, IDEM_STMT_CHECKPOINT, &args, NULL, NULL);
	IdemFinish(pin);
	PG_RETURN_VOID();
}

/*
 * idem_resolve(key, scope, action, response_code, response): an operator
 * settles a processing key.  'fail' makes it failed, not retryable, with
 * the given response replayed to later claims, under a new token so the
 * old holder is fenced off; 'release' deletes it so the next claim is new.
 */
Datum
idem_resolve(PG_FUNCTION_ARGS)
{
	int			pin;
	KeyCall		call;
	char	   *action;
	IdemArgs	args;
	IdemStmt	stmt;
	TimestampTz now;
	IdemStamp	stamp;

	GetKey(fcinfo, "idem_resolve", 0, 1, &call);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("action must not be null"),
				 IdemErrdetailKey(call.key, call.scope),
				 errhint("The action is 'fail' or 'release'.")));
	action = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (strcmp(action, "fail") == 0)
		stmt = IDEM_STMT_RESOLVE_FAIL;
	else if (strcmp(action, "release") == 0)
		stmt = IDEM_STMT_RESOLVE_RELEASE;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid action \"%s\"", action),
				 IdemErrdetailKey(call.key, call.scope),
				 errhint("The action is 'fail' or 'release'.")));
	PreventCommandIfReadOnly("idem_resolve()");

	args = IdemKeyArgs(call.scope, call.key);
	ArgOrNull(&args, IDEM_PARAM_RESPONSE_CODE, fcinfo, 3);
	ArgOrNull(&args, IDEM_PARAM_RESPONSE, fcinfo, 4);
	if (!PG_ARGISNULL(4))
		IdemCheckResponse(PG_GETARG_DATUM(4), call.key, call.scope);

	IdemStampInit(&stamp);
	pin = IdemConnect();
	if (stmt == IDEM_STMT_RESOLVE_FAIL)
	{
		IdemArg(&args, IDEM_PARAM_NEW_TOKEN, Int64GetDatum(IdemNextToken(call.nspid)));
		now = IdemStampArgs(&stamp, stmt, call.nspid, &args);	/* after the plan is made */
	}
	else
	{
		IdemPrepare(stmt, call.nspid);
		now = GetCurrentTimestamp();
		IdemArg(&args, IDEM_PARAM_NOW, TimestampTzGetDatum(now));
	}
	IdemArg(&args, IDEM_PARAM_EXPIRES_AT,
			TimestampTzGetDatum(IdemTimePlus(now, IdemSecondsInterval(idem_retention_seconds))));
	if (IdemExecute(stmt, call.nspid, &args, false, 0) == 0)
	{
		/* token_given with a token no row has: reports missing or state */
		call.token_given = true;
		call.token = -1;
		{
			IdemRow		row;

			IdemExecute(IDEM_STMT_SELECT, call.nspid, &args, false, 1);
			IdemReadRow(&row, CurrentMemoryContext);
			if (row.found)
				call.token = row.token;
		}
		ReportNoMatch(&call);
	}
	(void) IdemStampEnd(&stamp, call.nspid);
	IdemFinish(pin);
	IdemAwaitNotify(call.scope, call.key);
	PG_RETURN_VOID();
}

/*
 * idem_lookup(key, scope): the key's row, or no row
 */
Datum
idem_lookup(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;

	if (SRF_IS_FIRSTCALL())
	{
		KeyCall		call;
		IdemArgs	args;
		MemoryContext old;
		TupleDesc	desc;
		int			pin;

		funcctx = SRF_FIRSTCALL_INIT();
		GetKey(fcinfo, "idem_lookup", 0, 1, &call);

		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		funcctx->tuple_desc = BlessTupleDesc(desc);
		MemoryContextSwitchTo(old);

		args = IdemKeyArgs(call.scope, call.key);
		pin = IdemConnect();
		if (IdemExecute(IDEM_STMT_LOOKUP, call.nspid, &args, true, 1) > 0)
		{
			old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
			funcctx->user_fctx = heap_copytuple(SPI_tuptable->vals[0]);
			MemoryContextSwitchTo(old);
		}
		IdemFinish(pin);
	}

	funcctx = SRF_PERCALL_SETUP();
	if (funcctx->user_fctx != NULL)
	{
		HeapTuple	tup = (HeapTuple) funcctx->user_fctx;

		funcctx->user_fctx = NULL;
		SRF_RETURN_NEXT(funcctx, heap_copy_tuple_as_datum(tup, funcctx->tuple_desc));
	}
	SRF_RETURN_DONE(funcctx);
}
