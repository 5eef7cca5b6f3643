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
 * read-only SELECT.  A new key is a SELECT that finds nothing, the key's
 * lock (below) and an INSERT ... ON CONFLICT DO NOTHING.  Rows that must be
 * taken over (lease run out, failed retryable, past expires_at) are updated
 * with the token seen as a guard, so a row that changed in between is read
 * again rather than overwritten.  Tokens, lease ends and expiry times are
 * computed here and passed as parameters, so that every statement routes
 * to one shard where the table is distributed.
 *
 * Before it writes the key's row, a claim takes the key's lock: a
 * transaction-level advisory lock on a 64-bit hash of (scope, key), held
 * until its transaction ends.  A claim with wait => true waits for it (as it
 * would wait for the other transaction's row anyway); with wait => false it
 * only tries, and a lock held by another transaction means that transaction
 * is writing the key: in_progress, at once.  A wait => false claim that must
 * update a committed row first locks the row with SKIP LOCKED, so a row
 * another transaction is changing (a holder's complete, the worker) is
 * in_progress too.  So wait => false never waits for a lock and needs no
 * subtransaction.  Readers (replays, in_progress) take no lock.  A
 * transaction holds a bounded number of key locks (keylock.c): a wait =>
 * false claim of a key that a large batch wrote past them waits for the
 * batch like wait => true.
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
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "common.h"
#include "settings.h"
#include "store.h"
#include "input.h"
#include "claim.h"
#include "hash.h"
#include "stats.h"
#include "await.h"
#include "keylock.h"

PG_FUNCTION_INFO_V1(idem_claim);

/* Give up after this many rounds of a key changing under us */
#define CLAIM_MAX_ROUNDS 100

/* retry_after when another transaction holds the key uncommitted */
#define CLAIM_UNCOMMITTED_RETRY_SECONDS 1

/* Each outcome's name (idem_claim's outcome column) and counter */
static const struct
{
	const char *name;
	IdemStat	stat;
}			outcomes[IDEM_NUM_OUTCOMES] = {
	[IDEM_OUTCOME_NEW] = {"new", IDEM_STAT_CLAIM_NEW},
	[IDEM_OUTCOME_REPLAY] = {"replay", IDEM_STAT_CLAIM_REPLAY},
	[IDEM_OUTCOME_IN_PROGRESS] = {"in_progress", IDEM_STAT_CLAIM_IN_PROGRESS},
	[IDEM_OUTCOME_RECLAIMED] = {"reclaimed", IDEM_STAT_CLAIM_RECLAIMED},
	[IDEM_OUTCOME_STALE] = {"stale", IDEM_STAT_CLAIM_STALE},
	[IDEM_OUTCOME_MISMATCH] = {"mismatch", IDEM_STAT_MISMATCH},
};

/* An outcome as idem_claim's outcome column shows it */
const char *
IdemOutcomeName(IdemOutcome outcome)
{
	Assert(outcome >= 0 && outcome < IDEM_NUM_OUTCOMES);
	return outcomes[outcome].name;
}

/* What a claim does with the row it read (DecideClaim) */
typedef enum ClaimAction
{
	ACT_INSERT,					/* no row: insert one, processing */
	ACT_RENEW,					/* past expires_at: start afresh on the row */
	ACT_TAKEOVER,				/* failed retryable, or lease run out: take over */
	ACT_EXHAUST,				/* the same, but no attempt is left: make it final */
	ACT_MISMATCH,				/* another request under this key: error */
	ACT_REPLAY,					/* completed, or failed for good: replay */
	ACT_IN_PROGRESS,			/* processing, lease alive */
	ACT_STALE					/* processing, lease run out, stale_policy hold */
} ClaimAction;

/*
 * Decide what a claim of the request with this hash does, at now, given
 * the key's row as read (row->found false: none).  Reads nothing, writes
 * nothing.
 */
static ClaimAction
DecideClaim(const IdemRow *row, bytea *hash, TimestampTz now, bool reclaim,
			int32 max_attempts)
{
	if (!row->found)
		return ACT_INSERT;
	if (row->expires_at <= now && (reclaim || row->status_code != IDEM_PROCESSING))
		return ACT_RENEW;
	if (!IdemSameRequest(row->request_hash, hash))
		return ACT_MISMATCH;
	if (row->status_code == IDEM_COMPLETED ||
		(row->status_code == IDEM_FAILED && !row->retryable))
		return ACT_REPLAY;
	if (row->status_code == IDEM_PROCESSING && row->locked_until > now)
		return ACT_IN_PROGRESS;
	if (row->status_code == IDEM_PROCESSING && !reclaim)
		return ACT_STALE;
	/* a table before 0.4.0 counts no attempts (attempts 0): no limit */
	if (max_attempts > 0 && row->attempts >= max_attempts)
		return ACT_EXHAUST;
	return ACT_TAKEOVER;
}

/*
 * wait => false, before it updates the committed row it read: lock the
 * row, unless another transaction has it locked (returns false).
 */
static bool
TryLockRow(IdemClaimArgs *a)
{
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);

	return IdemExecute(IDEM_STMT_TRY_LOCK_ROW, a->nspid, &args, false, 0) > 0;
}

/*
 * wait => false found the key's lock held, about to insert the key's row,
 * and row level security applies to the caller.  in_progress would tell a
 * scope the caller may not use (some other tenant is writing that key)
 * from one it may: try the INSERT instead, which checks the policy before
 * anything else and so raises 42501 for a scope the caller may not use, as
 * for any other claim there.  In its own scope it then waits for the
 * writer's row, for at most lock_timeout = 1 ms, in a subtransaction: a
 * lock timeout means busy (in_progress); a writer that rolled back
 * meanwhile leaves the row to this claim.
 */
typedef struct PolicyInsert
{
	IdemClaimArgs *a;
	const IdemArgs *args;
	bool		written;
} PolicyInsert;

static void
PolicyInsertBody(void *arg)
{
	PolicyInsert *p = (PolicyInsert *) arg;
	int			level = NewGUCNestLevel();

	(void) set_config_option("lock_timeout", "1", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	p->written = IdemExecute(IDEM_STMT_INSERT, p->a->nspid, p->args, false, 0) > 0;
	AtEOXact_GUC(true, level);
}

static bool
PolicyCheckedInsert(IdemClaimArgs *a, const IdemArgs *args, bool *busy)
{
	static const int caught[] = {ERRCODE_LOCK_NOT_AVAILABLE, 0};
	PolicyInsert p = {a, args, false};

	*busy = IdemRunInSubtransaction(PolicyInsertBody, &p, caught, NULL) != 0;
	return !*busy && p.written;
}

/*
 * Run one of a claim's writes, after taking the key's lock (and, for an
 * update with wait => false, the row's), with a new token as :new_token and
 * the lease and expiry counted from after every wait; returns whether it
 * changed a row (then SPI_tuptable starts with its token and status).  Sets
 * *busy, writing nothing, when wait => false finds either lock held by
 * another transaction.
 *
 * Under row level security an insert only tries the key's lock at first,
 * with wait => true too: a lock held in a scope the caller may not use
 * must get 42501 at once, as a free one does (PolicyCheckedInsert), not
 * after its holder's end, which would tell the caller that the other
 * tenant is writing that key, and keep it waiting there (with the locks of
 * the keys it claimed before).  In its own scope, wait => true then waits
 * for the lock as ever.
 */
static bool
ClaimWrite(IdemClaimArgs *a, IdemStmt stmt, IdemArgs *args, bool *busy)
{
	bool		rls_insert = stmt == IDEM_STMT_INSERT && IdemRlsApplies(a->nspid);
	bool		policy_check;
	bool		written;

	*busy = !IdemLockKey(a, a->wait && !rls_insert) ||
		(!a->wait && stmt != IDEM_STMT_INSERT && !TryLockRow(a));
	policy_check = *busy && rls_insert;
	if (*busy && !policy_check)
		return false;

	IdemStampWrite(a, stmt, args);
	IdemArg(args, IDEM_PARAM_NEW_TOKEN, Int64GetDatum(IdemNextToken(a->nspid)));
	if (policy_check)
	{
		written = PolicyCheckedInsert(a, args, busy);
		if (*busy && a->wait)
		{
			/* the caller's scope, and another transaction writing the key */
			(void) IdemLockKey(a, true);
			IdemStampWrite(a, stmt, args);
			written = IdemExecute(stmt, a->nspid, args, false, 0) > 0;
			*busy = false;
		}
	}
	else
		written = IdemExecute(stmt, a->nspid, args, false, 0) > 0;
	return written;
}

/* The key's row as it is now */
static void
ReadKeyRow(IdemClaimArgs *a, IdemRow *row)
{
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);

	IdemExecute(IDEM_STMT_SELECT, a->nspid, &args, false, 1);
	IdemReadRow(row, CurrentMemoryContext);
}

/* The request differs from the one the key was first claimed with */
static void
ReportMismatch(IdemClaimArgs *a)
{
	IdemStatsAdd(IDEM_STAT_MISMATCH, 1);
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_REQUEST_MISMATCH),
			 errmsg("idempotency key was already used with a different request"),
			 errdetail("Key \"%s\" in scope \"%s\" was first claimed with another request.",
					   IdemKeyForMessage(a->key), IdemKeyForMessage(a->scope)),
			 errhint("Send the original request again, or use a new key for a new request.")));
}

/*
 * Write the key's row for an INSERT, RENEW or TAKEOVER action, guarded by
 * the token read (ClaimWrite takes the locks and draws the new token).
 * Returns whether a row was written; *busy as ClaimWrite sets it.  On
 * success the statement's RETURNING row is in SPI_tuptable.
 */
static bool
WriteClaim(IdemClaimArgs *a, ClaimAction act, const IdemRow *row, bool reclaim,
		   bool *busy)
{
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);
	IdemStmt	stmt = act == ACT_INSERT ? IDEM_STMT_INSERT :
		act == ACT_RENEW ? IDEM_STMT_RENEW : IDEM_STMT_TAKEOVER;

	IdemArgPtr(&args, IDEM_PARAM_REQUEST_HASH, a->hash);
	IdemArg(&args, IDEM_PARAM_TOKEN, Int64GetDatum(row->token));
	IdemArg(&args, IDEM_PARAM_RECLAIM, BoolGetDatum(reclaim));
	return ClaimWrite(a, stmt, &args, busy);
}

/* More than the text the exhausted response adds around the last response */
#define EXHAUSTED_WRAPPER_TEXT 256

/* A value of a jsonb object that JsonbObjectOf builds: a jsonb's root */
typedef struct JsonbPiece
{
	JEntry		type;			/* JENTRY_IS* */
	const char *data;
	uint32		len;
	bool		aligned;		/* starts at a 4-byte boundary (numeric, container) */
} JsonbPiece;

/*
 * The root of jsonb jb as a value inside another container: a scalar's
 * value, or the container itself.  A jsonb container holds only offsets
 * relative to itself, so it is embedded byte for byte, as the jsonb code
 * itself returns a nested one (jbvBinary).
 */
static JsonbPiece
JsonbPieceOf(Jsonb *jb)
{
	JsonbPiece	p;

	if (JB_ROOT_IS_SCALAR(jb))
	{
		/* a one-element array; its element's data starts after its JEntry */
		JEntry		e = jb->root.children[0];

		p.type = e & JENTRY_TYPEMASK;
		p.data = (const char *) &jb->root.children[1];
		p.len = JBE_OFFLENFLD(e);
	}
	else
	{
		p.type = JENTRY_ISCONTAINER;
		p.data = (const char *) &jb->root;
		p.len = VARSIZE(jb) - VARHDRSZ;
	}
	p.aligned = p.type == JENTRY_ISNUMERIC || p.type == JENTRY_ISCONTAINER;
	return p;
}

/*
 * A jsonb object of n pairs, its keys given in jsonb's order (shorter
 * first, then bytewise), each value the root of a jsonb (JsonbPieceOf),
 * written in jsonb's on-disk format (utils/jsonb.h): the values are copied,
 * never printed, parsed nor taken apart, so this costs their stored bytes.
 * NULL when the object would be larger than a jsonb container can be.
 */
static Jsonb *
JsonbObjectOf(int n, const char *const *keys, Jsonb *const *values)
{
	JsonbPiece *pieces = palloc(sizeof(JsonbPiece) * 2 * n);
	Size		meta = sizeof(uint32) + sizeof(JEntry) * 2 * n;
	Size		end = 0;
	Jsonb	   *jb;
	char	   *base;

	for (int i = 0; i < n; i++)
	{
		Assert(i == 0 || strlen(keys[i - 1]) < strlen(keys[i]) ||
			   (strlen(keys[i - 1]) == strlen(keys[i]) && strcmp(keys[i - 1], keys[i]) < 0));
		pieces[i] = (JsonbPiece) {JENTRY_ISSTRING, keys[i], strlen(keys[i]), false};
		pieces[n + i] = JsonbPieceOf(values[i]);
	}
	for (int i = 0; i < 2 * n; i++)
	{
		if (pieces[i].aligned)
			end = INTALIGN(end);
		end += pieces[i].len;
		if (meta + end > JENTRY_OFFLENMASK)
			return NULL;
	}

	jb = palloc0(VARHDRSZ + meta + end);
	SET_VARSIZE(jb, VARHDRSZ + meta + end);
	jb->root.header = (uint32) n | JB_FOBJECT;
	base = (char *) &jb->root.children[2 * n];
	end = 0;
	for (int i = 0; i < 2 * n; i++)
	{
		Size		start = end;

		/* padding (zeroes) belongs to the value after it */
		if (pieces[i].aligned)
			end = INTALIGN(end);
		memcpy(base + end, pieces[i].data, pieces[i].len);
		end += pieces[i].len;
		/* every JB_OFFSET_STRIDE'th JEntry holds its end offset, the others their length */
		jb->root.children[i] = pieces[i].type |
			((i % JB_OFFSET_STRIDE) == 0 ? (uint32) end | JENTRY_HAS_OFF : (uint32) (end - start));
	}
	return jb;
}

/* A small jsonb from its text */
static Jsonb *
JsonbOfText(const char *text)
{
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
}

/*
 * The response a key made final by the attempts limit keeps: what it says,
 * the counts, and the last attempt's response (the failure it stored; null
 * for a holder whose lease ran out).  A last response too long to store
 * with the rest around it (input.c: its text, or its depth one level
 * down) is left out, and the response says so:
 * the key must become final whatever its last attempt stored.  The last
 * response is embedded as stored (JsonbObjectOf), not printed and parsed
 * back: its text can be 13,000 times its size (a number of 10 bytes prints
 * 131,072 digits), and so would the time and memory.
 */
static Datum
ExhaustedResponse(const IdemRow *row, int32 max_attempts)
{
	static const char *const keys[] = {
		"error", "attempts", "max_attempts", "last_response", "last_response_omitted"
	};
	Jsonb	   *values[lengthof(keys)];
	Jsonb	   *response = NULL;
	bool		has_last = row->response != (Datum) 0;

	values[0] = JsonbOfText("\"attempts_exhausted\"");
	values[1] = JsonbOfText(psprintf("%d", row->attempts));
	values[2] = JsonbOfText(psprintf("%d", max_attempts));
	if (has_last && IdemResponseFitsIn(row->response, EXHAUSTED_WRAPPER_TEXT))
	{
		values[3] = DatumGetJsonbP(row->response);
		response = JsonbObjectOf(4, keys, values);
		/* the whole judged as the SQL edition judges it: one level deeper, and larger */
		if (!IdemResponseFitsIn(JsonbPGetDatum(response), 0))
			response = NULL;
	}
	if (response == NULL)
	{
		values[3] = JsonbOfText("null");
		values[4] = JsonbOfText("\"too large to store inside this response\"");
		response = JsonbObjectOf(has_last ? 5 : 4, keys, values);
	}
	return JsonbPGetDatum(response);
}

/*
 * A takeover with no attempt left: make the key final (IDEM_STMT_EXHAUST),
 * guarded by the token read, with the key's lock (ClaimWrite); on success
 * row becomes what was written, for PackRead to answer as a replay.
 */
static bool
ExhaustClaim(IdemClaimArgs *a, IdemRow *row, bool reclaim, TupleDesc desc,
			 bool *busy)
{
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);
	Datum		response = ExhaustedResponse(row, a->max_attempts);
	Interval	no_lease = {0};
	Interval   *lease = a->lease;
	bool		written;

	IdemArg(&args, IDEM_PARAM_TOKEN, Int64GetDatum(row->token));
	IdemArg(&args, IDEM_PARAM_RECLAIM, BoolGetDatum(reclaim));
	IdemArg(&args, IDEM_PARAM_MAX_ATTEMPTS, Int32GetDatum(a->max_attempts));
	IdemArg(&args, IDEM_PARAM_RESPONSE, response);
	/* no lease: expires_at (ClaimWrite's) is now + retention */
	a->lease = &no_lease;
	written = ClaimWrite(a, IDEM_STMT_EXHAUST, &args, busy);
	a->lease = lease;
	if (written)
	{
		IdemStatsAdd(IDEM_STAT_ATTEMPTS_EXHAUSTED, 1);
		row->status = IdemStatusValue(TupleDescAttr(desc, CLAIM_STATUS)->atttypid, IDEM_FAILED);
		row->status_code = IDEM_FAILED;
		row->retryable = false;
		row->response = response;
	}
	return written;
}

/* Set one result column (not null) */
static void
SetResult(Datum *values, bool *nulls, int col, Datum value)
{
	values[col] = value;
	nulls[col] = false;
}

/*
 * The result of a claim that only read: replay (the stored response),
 * in_progress (when to retry) or stale (how far the holder got).
 */
static void
PackRead(IdemOutcome outcome, const IdemRow *row, TimestampTz now,
		 Datum *values, bool *nulls)
{
	SetResult(values, nulls, CLAIM_STATUS, row->status);
	if (outcome == IDEM_OUTCOME_REPLAY)
	{
		if (!row->response_code_null)
			SetResult(values, nulls, CLAIM_RESPONSE_CODE, Int32GetDatum(row->response_code));
		if (row->response != (Datum) 0)
			SetResult(values, nulls, CLAIM_RESPONSE, row->response);
	}
	else if (outcome == IDEM_OUTCOME_IN_PROGRESS)
		SetResult(values, nulls, CLAIM_RETRY_AFTER,
				  DirectFunctionCall2(timestamp_mi,
									  TimestampTzGetDatum(row->locked_until),
									  TimestampTzGetDatum(now)));
	else if (outcome == IDEM_OUTCOME_STALE && row->recovery_point != NULL)
		SetResult(values, nulls, CLAIM_RECOVERY_POINT, PointerGetDatum(row->recovery_point));
}

/*
 * The result of a claim that wrote the key's row (new, reclaimed), from
 * the write's RETURNING token, status; remembered for this transaction.
 */
static void
PackWritten(IdemClaimArgs *a, IdemOutcome outcome, const IdemRow *row,
			Datum *values, bool *nulls)
{
	bool		isnull;
	HeapTuple	tup = SPI_tuptable->vals[0];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	int64		token = DatumGetInt64(SPI_getbinval(tup, desc, SPI_fnumber(desc, "token"), &isnull));

	SetResult(values, nulls, CLAIM_TOKEN, Int64GetDatum(token));
	SetResult(values, nulls, CLAIM_STATUS, SPI_getbinval(tup, desc, SPI_fnumber(desc, "status"), &isnull));
	if (outcome == IDEM_OUTCOME_RECLAIMED && row->recovery_point != NULL)
		SetResult(values, nulls, CLAIM_RECOVERY_POINT, PointerGetDatum(row->recovery_point));
	IdemRememberClaim(a->scope, a->key, token);
}

/* wait => false, and another open transaction is writing the key */
static void
PackBusy(TupleDesc desc, Datum *values, bool *nulls)
{
	SetResult(values, nulls, CLAIM_STATUS, IdemStatusValue(TupleDescAttr(desc, CLAIM_STATUS)->atttypid, IDEM_PROCESSING));
	SetResult(values, nulls, CLAIM_RETRY_AFTER,
			  IntervalPGetDatum(IdemSecondsInterval(CLAIM_UNCOMMITTED_RETRY_SECONDS)));
}

/*
 * Claim (scope, key) or find what is there, filling values/nulls in the
 * layout of idem_claim's result (desc).  The caller has checked the
 * arguments and is connected to SPI; pass-by-reference results are
 * allocated in SPI's memory, so the caller forms its result row before
 * SPI_finish (SPI_returntuple).  Returns the outcome; with a->probe set,
 * IDEM_OUTCOME_NONE when the key has no row (then nothing was written or
 * counted).  Each round reads the row, decides (DecideClaim) and acts; a
 * write that finds the row changed since it was read starts a new round.
 * Its writes take their times from a->stamp: the caller ends the stamp
 * (IdemStampEnd) after its last statement, so that every lease it wrote
 * counts from after the call's last wait.
 */
IdemOutcome
IdemClaim(IdemClaimArgs *a, TupleDesc desc, Datum *values, bool *nulls)
{
	bool		reclaim = (idem_stale_policy == IDEM_STALE_RECLAIM);
	IdemOutcome outcome = IDEM_OUTCOME_NONE;
	bool		busy = false;
	IdemRow		row;

	memset(nulls, true, sizeof(bool) * IDEM_CLAIM_NCOLUMNS);
	a->wrote = false;

	/* await_result: wait, holding nothing, for a claim in flight (await.c) */
	if (IdemAwaitInFlight(a))
		IdemStatsAdd(IDEM_STAT_CLAIM_AWAITED, 1);

	for (int round = 0; outcome == IDEM_OUTCOME_NONE; round++)
	{
		ClaimAction act;

		CHECK_FOR_INTERRUPTS();
		if (round >= CLAIM_MAX_ROUNDS)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not claim idempotency key: it kept changing"),
					 errdetail("Key \"%s\" in scope \"%s\" changed %d times while it was being claimed.",
							   IdemKeyForMessage(a->key), IdemKeyForMessage(a->scope), round),
					 errhint("Retry the transaction.")));

		a->now = GetCurrentTimestamp();	/* after any wait before this round */
		ReadKeyRow(a, &row);
		if (a->probe && !row.found)
			return IDEM_OUTCOME_NONE;	/* the caller writes the key itself */

		act = DecideClaim(&row, a->hash, a->now, reclaim, a->max_attempts);
		switch (act)
		{
			case ACT_MISMATCH:
				if (!a->answer_mismatch)
					ReportMismatch(a);	/* does not return */
				outcome = IDEM_OUTCOME_MISMATCH;
				break;
			case ACT_REPLAY:
				outcome = IDEM_OUTCOME_REPLAY;
				break;
			case ACT_IN_PROGRESS:
				outcome = IDEM_OUTCOME_IN_PROGRESS;
				break;
			case ACT_STALE:
				outcome = IDEM_OUTCOME_STALE;
				break;
			case ACT_INSERT:
			case ACT_RENEW:
			case ACT_TAKEOVER:
				if ((a->wrote = WriteClaim(a, act, &row, reclaim, &busy)))
					outcome = act == ACT_TAKEOVER ? IDEM_OUTCOME_RECLAIMED : IDEM_OUTCOME_NEW;
				else if (busy)
					outcome = IDEM_OUTCOME_IN_PROGRESS;
				/* else a claim committed meanwhile: read it */
				break;
			case ACT_EXHAUST:
				if ((a->wrote = ExhaustClaim(a, &row, reclaim, desc, &busy)))
					outcome = IDEM_OUTCOME_REPLAY;
				else if (busy)
					outcome = IDEM_OUTCOME_IN_PROGRESS;
				break;
		}
	}

	if (busy)
		PackBusy(desc, values, nulls);
	else if (outcome == IDEM_OUTCOME_NEW || outcome == IDEM_OUTCOME_RECLAIMED)
		PackWritten(a, outcome, &row, values, nulls);
	else
		PackRead(outcome, &row, a->now, values, nulls);

	IdemStatsAdd(outcomes[outcome].stat, 1);
	SetResult(values, nulls, CLAIM_OUTCOME, CStringGetTextDatum(outcomes[outcome].name));
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
	text	   *key;
	text	   *scope;

	IdemGetKeyArgs(fcinfo, keyarg, scopearg, &key, &scope);
	IdemClaimArgsInit(fcinfo, fname, key, scope, lease, retention, wait, a);
	a->hash = PG_ARGISNULL(requestarg) ? NULL : IdemHashJsonb(PG_GETARG_DATUM(requestarg));
}

/*
 * The same, but for a key and scope already checked, and without the
 * request (a->hash NULL): the arguments a batch's claims share.
 */
void
IdemClaimArgsInit(FunctionCallInfo fcinfo, const char *fname, text *key,
				  text *scope, Interval *lease, Interval *retention, bool wait,
				  IdemClaimArgs *a)
{
	memset(a, 0, sizeof(IdemClaimArgs));
	a->key = key;
	a->scope = scope;
	a->lease = lease ? lease : IdemSecondsInterval(idem_lease_seconds);
	a->retention = retention ? retention : IdemSecondsInterval(idem_retention_seconds);
	/*
	 * The row expires at (now + lease) + retention, so the retention is
	 * checked from the lease's end: from now, a month or a day across a
	 * daylight saving change can be longer than from then.
	 */
	a->now = GetCurrentTimestamp();
	IdemCheckInterval(a->lease, "lease", a->now, a->key, a->scope);
	IdemCheckInterval(a->retention, "retention", IdemTimePlus(a->now, a->lease),
					  a->key, a->scope);
	a->wait = wait;
	a->max_attempts = idem_max_attempts;
	a->await_result = IdemAwaitDefault();	/* idempotency.await_result */
	IdemStampInit(&a->stamp);

	PreventCommandIfReadOnly(psprintf("%s()", fname));

	a->nspid = IdemNamespaceOf(fcinfo);
}

/*
 * The max_attempts argument argno, when the call has it and it is not
 * NULL, into a->max_attempts (else the setting stays there).
 */
int32
IdemMaxAttemptsArg(FunctionCallInfo fcinfo, int argno, IdemClaimArgs *a)
{
	if (PG_NARGS() > argno && !PG_ARGISNULL(argno))
	{
		a->max_attempts = PG_GETARG_INT32(argno);
		if (a->max_attempts < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_attempts must not be negative"),
					 errhint("0 means no limit."),
					 IdemErrdetailKey(a->key, a->scope)));
	}
	return a->max_attempts;
}

/*
 * idem_claim(key, request, scope, lease, retention, wait, await_result,
 * max_attempts); a database still at 0.3.0 declares the first six.
 */
Datum
idem_claim(PG_FUNCTION_ARGS)
{
	int			pin;
	IdemClaimArgs a;
	TupleDesc	desc;
	Datum		values[IDEM_CLAIM_NCOLUMNS];
	bool		nulls[IDEM_CLAIM_NCOLUMNS];
	HeapTupleHeader result;

	IdemClaimArgsFrom(fcinfo, "idem_claim", 0, 1, 2,
					  PG_ARGISNULL(3) ? NULL : PG_GETARG_INTERVAL_P(3),
					  PG_ARGISNULL(4) ? NULL : PG_GETARG_INTERVAL_P(4),
					  PG_ARGISNULL(5) || PG_GETARG_BOOL(5), &a);
	if (PG_ARGISNULL(5))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("wait must not be null"),
				 IdemErrdetailKey(a.key, a.scope)));
	(void) IdemMaxAttemptsArg(fcinfo, 7, &a);
	if (PG_NARGS() > 6 && !PG_ARGISNULL(6))
		a.await_result = IdemAwaitArg(PG_GETARG_INTERVAL_P(6), a.key, a.scope);

	desc = IdemResultDesc(fcinfo);

	pin = IdemConnect();
	IdemClaim(&a, desc, values, nulls);
	(void) IdemStampEnd(&a.stamp, a.nspid);
	/* the result row, copied out of SPI's memory before SPI_finish */
	result = SPI_returntuple(heap_form_tuple(desc, values, nulls), desc);
	IdemFinish(pin);
	PG_RETURN_HEAPTUPLEHEADER(result);
}
