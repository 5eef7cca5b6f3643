/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  idem_claim(): claim an idempotency key or report what is already there.
 *
 * Runs in the caller's transaction, with INSERT ... ON CONFLICT semantics:
 * of any number of concurrent claimers of a key exactly one gets "new";
 * the others wait for its transaction and then see "replay" (it committed
 * a result), "in_progress" (it committed a claim whose lease is alive) or
 * "new" (it rolled back).
 *
 * The common case is cheap.  A duplicate of a completed key is one
 * read-only SELECT.  A new key is a SELECT that finds nothing and an
 * INSERT ... ON CONFLICT DO NOTHING, which waits for an uncommitted
 * duplicate and then finds it.  Rows that must be taken over (lease run
 * out, failed retryable, past expires_at) are updated with the token seen
 * as a guard, so a row that changed in between is read again rather than
 * overwritten.  No lock is taken besides what those statements take: a
 * transaction may claim any number of keys.
 *
 * With wait => false a claim must not wait for another open transaction.
 * Its writes run in a subtransaction with lock_timeout at 1 ms; a lock
 * timeout there means another transaction holds the key uncommitted, and
 * the outcome is in_progress.
 *
 * Under READ COMMITTED every statement sees the latest committed rows, so
 * the loop always makes progress.  Under REPEATABLE READ and SERIALIZABLE
 * the snapshot is fixed: a key claimed and committed by another
 * transaction after the snapshot was taken makes the INSERT or UPDATE fail
 * with serialization_failure (40001), for the caller to retry.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "idempotency.h"

PG_FUNCTION_INFO_V1(idem_claim);

/* Give up after this many rounds of a key changing under us */
#define CLAIM_MAX_ROUNDS 100

/* retry_after when another transaction holds the key uncommitted */
#define CLAIM_UNCOMMITTED_RETRY_SECONDS 1

/* Do the stored and the given request hashes count as the same request? */
static bool
SameRequest(bytea *stored, bytea *given)
{
	if (stored == NULL || given == NULL)
		return stored == NULL && given == NULL;
	return VARSIZE_ANY_EXHDR(stored) == VARSIZE_ANY_EXHDR(given) &&
		memcmp(VARDATA_ANY(stored), VARDATA_ANY(given),
			   VARSIZE_ANY_EXHDR(given)) == 0;
}

/* The enum value 'processing' of the status column type */
static Datum
ProcessingStatus(TupleDesc desc)
{
	return DirectFunctionCall2(enum_in, CStringGetDatum("processing"),
							   ObjectIdGetDatum(TupleDescAttr(desc, CLAIM_STATUS)->atttypid));
}

/* The counter of an outcome */
static IdemStat
OutcomeStat(const char *outcome)
{
	switch (outcome[0])
	{
		case 'n':
			return IDEM_STAT_CLAIM_NEW;
		case 'r':
			return outcome[2] == 'p' ? IDEM_STAT_CLAIM_REPLAY : IDEM_STAT_CLAIM_RECLAIMED;
		case 'i':
			return IDEM_STAT_CLAIM_IN_PROGRESS;
		default:
			return IDEM_STAT_CLAIM_STALE;
	}
}

/*
 * Run one of a claim's writes; returns whether it changed a row.  With
 * wait => false it runs in a subtransaction with lock_timeout at 1 ms, and
 * a lock timeout sets *busy instead of raising: another open transaction
 * holds the key.
 */
static bool
ClaimWrite(IdemClaimArgs *a, IdemStmt stmt, Datum *args, const char *argnulls,
		   bool *busy)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool written = false;

	*busy = false;
	if (a->wait)
		return IdemExecute(stmt, a->nspid, args, argnulls, false, 0) > 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		int			level = NewGUCNestLevel();

		(void) set_config_option("lock_timeout", "1", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		written = IdemExecute(stmt, a->nspid, args, argnulls, false, 0) > 0;
		AtEOXact_GUC(true, level);
		ReleaseCurrentSubTransaction();
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
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			ReThrowError(edata);
		FreeErrorData(edata);
		*busy = true;
	}
	PG_END_TRY();
	return written;
}

/*
 * Claim (scope, key) or find what is there, filling values/nulls in the
 * layout of idem_claim's result (desc).  The caller has checked the
 * arguments and is connected to SPI; pass-by-reference results are
 * allocated in callcxt.  Returns the outcome; with a->probe set, NULL when
 * the key has no row (then nothing was written or counted).
 */
const char *
IdemClaim(IdemClaimArgs *a, TupleDesc desc, MemoryContext callcxt,
		  Datum *values, bool *nulls)
{
	bool		reclaim = (idem_stale_policy == IDEM_STALE_RECLAIM);
	TimestampTz now = a->now;
	text	   *key = a->key;
	text	   *scope = a->scope;
	bytea	   *hash = a->hash;
	const char *outcome = NULL;
	bool		busy = false;
	IdemRow		row;
	MemoryContext oldcxt;		/* results go to callcxt: SPI_finish frees SPI's */

	memset(nulls, true, sizeof(bool) * IDEM_CLAIM_NCOLUMNS);

	for (int round = 0; outcome == NULL && !busy; round++)
	{
		Datum		args[8];
		char		argnulls[8];
		bool		expired;
		bool		written;

		CHECK_FOR_INTERRUPTS();
		if (round >= CLAIM_MAX_ROUNDS)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not claim idempotency key: it kept changing"),
					 errdetail("Key \"%s\" in scope \"%s\" changed %d times while it was being claimed.",
							   IdemKeyForMessage(key), IdemKeyForMessage(scope), round),
					 errhint("Retry the transaction.")));

		args[0] = PointerGetDatum(scope);
		args[1] = PointerGetDatum(key);
		IdemExecute(IDEM_STMT_SELECT, a->nspid, args, NULL, false, 1);
		IdemReadRow(&row, callcxt);
		if (a->probe && !row.found)
			return NULL;		/* the caller writes the key itself */

		expired = row.found && row.expires_at <= now &&
			(reclaim || row.status_code != IDEM_PROCESSING);

		if (row.found && !expired)
		{
			if (!SameRequest(row.request_hash, hash))
			{
				IdemStatsAdd(IDEM_STAT_MISMATCH, 1);
				ereport(ERROR,
						(errcode(ERRCODE_IDEM_REQUEST_MISMATCH),
						 errmsg("idempotency key was already used with a different request"),
						 errdetail("Key \"%s\" in scope \"%s\" was first claimed with another request.",
								   IdemKeyForMessage(key), IdemKeyForMessage(scope)),
						 errhint("Send the original request again, or use a new key for a new request.")));
			}

			if (row.status_code == IDEM_COMPLETED ||
				(row.status_code == IDEM_FAILED && !row.retryable))
			{
				outcome = "replay";
				values[CLAIM_STATUS] = row.status;
				nulls[CLAIM_STATUS] = false;
				if (!row.response_code_null)
				{
					values[CLAIM_RESPONSE_CODE] = Int32GetDatum(row.response_code);
					nulls[CLAIM_RESPONSE_CODE] = false;
				}
				if (row.response != (Datum) 0)
				{
					values[CLAIM_RESPONSE] = row.response;
					nulls[CLAIM_RESPONSE] = false;
				}
				break;
			}
			if (row.status_code == IDEM_PROCESSING && row.locked_until > now)
			{
				outcome = "in_progress";
				values[CLAIM_STATUS] = row.status;
				nulls[CLAIM_STATUS] = false;
				oldcxt = MemoryContextSwitchTo(callcxt);
				values[CLAIM_RETRY_AFTER] =
					DirectFunctionCall2(timestamp_mi,
										TimestampTzGetDatum(row.locked_until),
										TimestampTzGetDatum(now));
				MemoryContextSwitchTo(oldcxt);
				nulls[CLAIM_RETRY_AFTER] = false;
				break;
			}
			if (row.status_code == IDEM_PROCESSING && !reclaim)
			{
				outcome = "stale";
				values[CLAIM_STATUS] = row.status;
				nulls[CLAIM_STATUS] = false;
				if (row.recovery_point != NULL)
				{
					values[CLAIM_RECOVERY_POINT] = PointerGetDatum(row.recovery_point);
					nulls[CLAIM_RECOVERY_POINT] = false;
				}
				break;
			}
			/* failed and retryable, or lease ran out: take it over below */
		}

		memset(argnulls, ' ', sizeof(argnulls));
		if (!row.found || expired)
		{
			args[2] = hash ? PointerGetDatum(hash) : (Datum) 0;
			argnulls[2] = hash ? ' ' : 'n';
			args[3] = TimestampTzGetDatum(now);
			args[4] = IntervalPGetDatum(a->lease);
			args[5] = IntervalPGetDatum(a->retention);
			if (!row.found)
				written = ClaimWrite(a, IDEM_STMT_INSERT, args, argnulls, &busy);
			else
			{
				args[6] = Int64GetDatum(row.token);
				args[7] = BoolGetDatum(reclaim);
				written = ClaimWrite(a, IDEM_STMT_RENEW, args, argnulls, &busy);
			}
			if (busy)
				break;
			if (!written)
				continue;		/* a claim committed meanwhile: read it */
			outcome = "new";
		}
		else
		{
			args[2] = Int64GetDatum(row.token);
			args[3] = TimestampTzGetDatum(now);
			args[4] = IntervalPGetDatum(a->lease);
			args[5] = IntervalPGetDatum(a->retention);
			args[6] = BoolGetDatum(reclaim);
			written = ClaimWrite(a, IDEM_STMT_TAKEOVER, args, argnulls, &busy);
			if (busy)
				break;
			if (!written)
				continue;
			outcome = "reclaimed";
			if (row.recovery_point != NULL)
			{
				values[CLAIM_RECOVERY_POINT] = PointerGetDatum(row.recovery_point);
				nulls[CLAIM_RECOVERY_POINT] = false;
			}
		}

		/* new or reclaimed: RETURNING token, status */
		{
			bool		isnull;
			HeapTuple	tup = SPI_tuptable->vals[0];
			int64		token = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));

			oldcxt = MemoryContextSwitchTo(callcxt);	/* int8 may be by reference */
			values[CLAIM_TOKEN] = Int64GetDatum(token);
			MemoryContextSwitchTo(oldcxt);
			nulls[CLAIM_TOKEN] = false;
			values[CLAIM_STATUS] = SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull);
			nulls[CLAIM_STATUS] = false;
			IdemRememberClaim(scope, key, token);
		}
	}

	if (busy)
	{
		/* wait => false, and another open transaction holds the key */
		outcome = "in_progress";
		values[CLAIM_STATUS] = ProcessingStatus(desc);
		nulls[CLAIM_STATUS] = false;
		oldcxt = MemoryContextSwitchTo(callcxt);
		values[CLAIM_RETRY_AFTER] =
			IntervalPGetDatum(IdemSecondsInterval(CLAIM_UNCOMMITTED_RETRY_SECONDS));
		MemoryContextSwitchTo(oldcxt);
		nulls[CLAIM_RETRY_AFTER] = false;
	}

	IdemStatsAdd(OutcomeStat(outcome), 1);
	oldcxt = MemoryContextSwitchTo(callcxt);
	values[CLAIM_OUTCOME] = CStringGetTextDatum(outcome);
	MemoryContextSwitchTo(oldcxt);
	nulls[CLAIM_OUTCOME] = false;
	return outcome;
}

/*
 * Read and check the arguments every claim has.  keyarg, requestarg and
 * scopearg are argument numbers; lease, retention and wait are passed by
 * the caller (NULL for the GUC defaults).
 */
void
IdemClaimArgsFrom(FunctionCallInfo fcinfo, const char *fname, int keyarg,
				  int requestarg, int scopearg, Interval *lease,
				  Interval *retention, bool wait, IdemClaimArgs *a)
{
	IdemGetKeyArgs(fcinfo, keyarg, scopearg, &a->key, &a->scope);
	a->lease = lease ? lease : IdemSecondsInterval(idem_lease_seconds);
	a->retention = retention ? retention : IdemSecondsInterval(idem_retention_seconds);
	a->now = GetCurrentTimestamp();
	IdemCheckInterval(a->lease, "lease", a->now, a->key, a->scope);
	IdemCheckInterval(a->retention, "retention", a->now, a->key, a->scope);
	a->wait = wait;
	a->probe = false;

	PreventCommandIfReadOnly(psprintf("%s()", fname));

	a->hash = PG_ARGISNULL(requestarg) ? NULL : IdemHashJsonb(PG_GETARG_DATUM(requestarg));
	a->nspid = IdemNamespaceOf(fcinfo);
}

/*
 * idem_claim(key, request, scope, lease, retention, wait)
 */
Datum
idem_claim(PG_FUNCTION_ARGS)
{
	IdemClaimArgs a;
	TupleDesc	desc;
	MemoryContext callcxt;
	Datum		values[IDEM_CLAIM_NCOLUMNS];
	bool		nulls[IDEM_CLAIM_NCOLUMNS];

	IdemClaimArgsFrom(fcinfo, "idem_claim", 0, 1, 2,
					  PG_ARGISNULL(3) ? NULL : PG_GETARG_INTERVAL_P(3),
					  PG_ARGISNULL(4) ? NULL : PG_GETARG_INTERVAL_P(4),
					  PG_ARGISNULL(5) || PG_GETARG_BOOL(5), &a);
	if (PG_ARGISNULL(5))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("wait must not be null"),
				 IdemErrdetailKey(a.key, a.scope)));

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	desc = BlessTupleDesc(desc);

	callcxt = CurrentMemoryContext;		/* results must outlive SPI_finish */
	SPI_connect();
	IdemClaim(&a, desc, callcxt, values, nulls);
	SPI_finish();

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
