/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  idem_claim_batch(): claim many keys of one scope in one call.
 *
 * Each key gets the answer idem_claim would have given it, had the keys
 * been claimed one by one in the order given, and the answers come back in
 * that order.  The claims themselves run in the keys' byte order (equal
 * keys in the order given), so two batches that share keys take their
 * locks in the same order and never deadlock on each other; keys that
 * differ do not affect each other's answers, and equal ones are claimed in
 * the order given, so the answers are the same.
 *
 * Every key is checked before any is claimed: a NULL, empty, over-long or
 * malformed key, or requests that do not match the keys one to one, fail
 * the whole call (and nothing is claimed).  A key already used with
 * another request does not: its row answers outcome "mismatch" (its
 * status, nothing else of the stored request) and the other keys are
 * claimed.  The batch runs in the caller's transaction, like idem_claim,
 * and without subtransactions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/tupdesc.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "common.h"
#include "store.h"
#include "input.h"
#include "claim.h"
#include "keylock.h"
#include "hash.h"
#include "stats.h"
#include "citus/citus.h"

PG_FUNCTION_INFO_V1(idem_claim_batch);

/* idem_claim_batch's arguments */
enum
{
	BATCH_ARG_KEYS,
	BATCH_ARG_REQUESTS,
	BATCH_ARG_SCOPE,
	BATCH_ARG_LEASE,
	BATCH_ARG_RETENTION,
	BATCH_ARG_WAIT,
	BATCH_ARG_MAX_ATTEMPTS
};

/*
 * The most bytes of answers one call holds: its rows are kept until the
 * last key is claimed (they are returned in the order given, not the order
 * claimed), so this bounds the call's memory, at the size of the largest
 * response a single claim can return.  Each row counts whole, as formed:
 * every stored value it carries (response, recovery point) at its size
 * held (read whole and decompressed), counted before the row is kept.
 */
#define BATCH_MAX_ANSWER_BYTES ((Size) 256 * 1024 * 1024)

/* One key of the batch */
typedef struct BatchItem
{
	int			index;			/* its place in the keys given, from 0 */
	text	   *key;
	bytea	   *hash;			/* NULL: no request */
	int64		token;			/* written by InsertNewKeys: its token; else 0 */
} BatchItem;

/* A token InsertNewKeys drew, and the item it is for */
typedef struct DrawnToken
{
	int64		token;
	BatchItem  *item;
} DrawnToken;

/* Keys in byte order, equal keys in the order given */
static int
CompareItems(const void *p, const void *q)
{
	const BatchItem *x = (const BatchItem *) p;
	const BatchItem *y = (const BatchItem *) q;
	int			c = IdemCompareKeys(x->key, y->key);

	if (c != 0)
		return c;
	return (x->index > y->index) - (x->index < y->index);
}

/* errcontext for whatever a key of the batch raises */
static void
BatchItemContext(void *arg)
{
	const BatchItem *item = (const BatchItem *) arg;

	if (item == NULL)
		return;					/* between keys */
	if (item->key != NULL)
		errcontext("key %d of the batch, \"%s\"", item->index + 1,
				   IdemKeyForMessage(item->key));
	else
		errcontext("key %d of the batch", item->index + 1);
}

/*
 * The keys and requests of the call, checked, in items (the order given);
 * returns how many.
 */
static int
BatchItems(FunctionCallInfo fcinfo, BatchItem **items)
{
	Datum	   *keys;
	bool	   *key_nulls;
	Datum	   *requests = NULL;
	bool	   *request_nulls = NULL;
	int			n;
	ErrorContextCallback context;

	if (PG_ARGISNULL(BATCH_ARG_KEYS))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("keys must not be null")));
	n = IdemArrayArg(fcinfo, BATCH_ARG_KEYS, "keys", TEXTOID, &keys, &key_nulls);
	if (!PG_ARGISNULL(BATCH_ARG_REQUESTS))
	{
		int			m = IdemArrayArg(fcinfo, BATCH_ARG_REQUESTS, "requests", JSONBOID,
									 &requests, &request_nulls);

		if (m != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("requests must have one element per key"),
					 errdetail("%d keys, %d requests.", n, m),
					 errhint("Pass NULL for the keys without a request, or leave requests out.")));
	}

	*items = palloc0(sizeof(BatchItem) * Max(n, 1));
	context.callback = BatchItemContext;
	context.previous = error_context_stack;
	error_context_stack = &context;
	for (int i = 0; i < n; i++)
	{
		BatchItem  *item = &(*items)[i];

		item->index = i;
		context.arg = item;
		if (key_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("idempotency key must not be null")));
		item->key = DatumGetTextPP(keys[i]);
		IdemValidateKey(item->key, "key");
		if (requests != NULL && !request_nulls[i])
			item->hash = IdemHashJsonb(requests[i]);
	}
	error_context_stack = context.previous;
	return n;
}

/*
 * A tuple descriptor in the layout of idem_claim's result (what IdemClaim
 * fills), from the batch's, whose first column is the key.
 */
static TupleDesc
ClaimDescOf(TupleDesc batch)
{
	TupleDesc	desc = CreateTemplateTupleDesc(IDEM_CLAIM_NCOLUMNS);

	for (int i = 0; i < IDEM_CLAIM_NCOLUMNS; i++)
		TupleDescCopyEntry(desc, i + 1, batch, i + 2);
	return desc;
}

static int
CompareTokens(const void *p, const void *q)
{
	int64		x = ((const DrawnToken *) p)->token;
	int64		y = ((const DrawnToken *) q)->token;

	return (x > y) - (x < y);
}

/*
 * The new keys of a batch in one statement, on a plain server with wait =>
 * true: the lock of every distinct key, in byte order, then one INSERT ...
 * ON CONFLICT DO NOTHING of them all (IDEM_STMT_INSERT_MANY), with the
 * lease and expiry taken after the locks.  Each key it wrote is new and
 * gets item->token; a key that has a row is left to IdemClaim, which reads
 * it (and finds the key's lock held already).  Returns the count of key
 * locks held before (IdemUnlockKeySince's mark).  items are sorted; only the
 * first of equal keys is written here, the later ones being duplicates of
 * it.  Its times come from the call's stamp, which moves them forward at
 * the call's end if the call waits after them (stamp.c).
 */
static int
InsertNewKeys(IdemClaimArgs *a, BatchItem *items, int n)
{
	Datum	   *keys = palloc(sizeof(Datum) * n);
	Datum	   *tokens = palloc(sizeof(Datum) * n);
	Datum	   *hashes = palloc(sizeof(Datum) * n);
	bool	   *hash_nulls = palloc(sizeof(bool) * n);
	DrawnToken *drawn = palloc(sizeof(DrawnToken) * n);
	IdemArgs	args = {.given = 0};
	TimestampTz lease_end;
	int			dims[1];
	int			lbs[1] = {1};
	int			m = 0;
	int			mark = IdemKeyLocksHeld();
	int			tokencol;

	for (int i = 0; i < n; i++)
	{
		if (i > 0 && IdemCompareKeys(items[i].key, items[i - 1].key) == 0)
			continue;
		CHECK_FOR_INTERRUPTS();
		a->key = items[i].key;
		(void) IdemLockKey(a, true);
		keys[m] = PointerGetDatum(items[i].key);
		hash_nulls[m] = items[i].hash == NULL;
		hashes[m] = PointerGetDatum(items[i].hash);
		drawn[m].token = IdemNextToken(a->nspid);
		drawn[m].item = &items[i];
		tokens[m] = Int64GetDatum(drawn[m].token);
		m++;
	}
	dims[0] = m;
	IdemArg(&args, IDEM_PARAM_SCOPE, PointerGetDatum(a->scope));
	IdemArg(&args, IDEM_PARAM_KEYS,
			PointerGetDatum(construct_array(keys, m, TEXTOID, -1, false, TYPALIGN_INT)));
	IdemArg(&args, IDEM_PARAM_TOKENS,
			PointerGetDatum(construct_array(tokens, m, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)));
	IdemArg(&args, IDEM_PARAM_HASHES,
			PointerGetDatum(construct_md_array(hashes, hash_nulls, 1, dims, lbs, BYTEAOID, -1, false, TYPALIGN_INT)));

	/* the times, taken after the locks and the statement's planning */
	a->now = IdemStampArgs(&a->stamp, IDEM_STMT_INSERT_MANY, a->nspid, &args);
	lease_end = IdemTimePlus(a->now, a->lease);
	IdemArg(&args, IDEM_PARAM_LEASE_END, TimestampTzGetDatum(lease_end));
	IdemArg(&args, IDEM_PARAM_EXPIRES_AT,
			TimestampTzGetDatum(IdemTimePlus(lease_end, a->retention)));
	IdemExecute(IDEM_STMT_INSERT_MANY, a->nspid, &args, false, 0);

	qsort(drawn, m, sizeof(DrawnToken), CompareTokens);
	tokencol = SPI_fnumber(SPI_tuptable->tupdesc, "token");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		DrawnToken	key;
		DrawnToken *found;

		key.token = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, tokencol, &isnull));
		found = bsearch(&key, drawn, m, sizeof(DrawnToken), CompareTokens);
		if (found == NULL)
			elog(ERROR, "batch insert returned a token it was not given");
		found->item->token = key.token;
	}
	/*
	 * A key that has a row keeps the lock taken for it here until
	 * IdemClaim has read it (idem_claim_batch lets go of it then unless
	 * it wrote the row): let go of now and taken again by a takeover, it
	 * could be taken in between by another batch that holds, or waits
	 * for, a later key of this one, a cycle.
	 */
	return mark;
}

/* The answer for a key InsertNewKeys wrote: new, its token, processing */
static void
PackNew(IdemClaimArgs *a, BatchItem *item, TupleDesc desc, Datum *values,
		bool *nulls)
{
	memset(nulls, true, sizeof(bool) * IDEM_CLAIM_NCOLUMNS);
	values[CLAIM_OUTCOME] = CStringGetTextDatum(IdemOutcomeName(IDEM_OUTCOME_NEW));
	nulls[CLAIM_OUTCOME] = false;
	values[CLAIM_TOKEN] = Int64GetDatum(item->token);
	nulls[CLAIM_TOKEN] = false;
	values[CLAIM_STATUS] = IdemStatusValue(TupleDescAttr(desc, CLAIM_STATUS)->atttypid, IDEM_PROCESSING);
	nulls[CLAIM_STATUS] = false;
	IdemRememberClaim(a->scope, item->key, item->token);
	IdemStatsAdd(IDEM_STAT_CLAIM_NEW, 1);
}

/*
 * idem_claim_batch(keys, requests, scope, lease, retention, wait,
 * max_attempts): a row (key, then idem_claim's columns) per key, in the
 * order given
 */
Datum
idem_claim_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	BatchItem  *items;
	HeapTuple  *rows;
	TupleDesc	claim_desc;
	IdemClaimArgs a;
	MemoryContext callcxt;
	ErrorContextCallback context;
	text	   *scope;
	int			n;
	int			pin;
	int			mark = -1;		/* InsertNewKeys': key locks held before */
	bool		key_wrote = false;	/* an item of this key wrote its row */
	Size		answer_bytes = 0;

	if (PG_ARGISNULL(BATCH_ARG_SCOPE))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("idempotency scope must not be null"),
				 errhint("The default scope is the empty string.")));
	scope = PG_GETARG_TEXT_PP(BATCH_ARG_SCOPE);
	IdemValidateKey(scope, "scope");
	if (PG_ARGISNULL(BATCH_ARG_WAIT))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("wait must not be null")));
	n = BatchItems(fcinfo, &items);

	InitMaterializedSRF(fcinfo, 0);
	if (n == 0)
		return (Datum) 0;

	IdemClaimArgsInit(fcinfo, "idem_claim_batch", items[0].key, scope,
					  PG_ARGISNULL(BATCH_ARG_LEASE) ? NULL : PG_GETARG_INTERVAL_P(BATCH_ARG_LEASE),
					  PG_ARGISNULL(BATCH_ARG_RETENTION) ? NULL : PG_GETARG_INTERVAL_P(BATCH_ARG_RETENTION),
					  PG_GETARG_BOOL(BATCH_ARG_WAIT), &a);
	(void) IdemMaxAttemptsArg(fcinfo, BATCH_ARG_MAX_ATTEMPTS, &a);
	a.answer_mismatch = true;
	/*
	 * No waiting for keys in flight (idempotency.await_result): one call
	 * would wait for each in turn, and keeps the locks of the keys it
	 * claimed meanwhile; those keys answer in_progress.
	 */
	a.await_result = NULL;

	qsort(items, n, sizeof(BatchItem), CompareItems);
	claim_desc = ClaimDescOf(rsinfo->setDesc);
	rows = palloc(sizeof(HeapTuple) * n);
	callcxt = CurrentMemoryContext;

	context.callback = BatchItemContext;
	context.arg = NULL;
	context.previous = error_context_stack;
	error_context_stack = &context;
	pin = IdemConnect();
	/*
	 * Under row level security each key goes through IdemClaim, which
	 * refuses a scope the caller may not use before it waits for any key's
	 * lock; the fast path would take the locks of all keys first.
	 */
	if (a.wait && !IdemCitusPresent() && IdemKeysHaveAttempts(a.nspid) &&
		!IdemRlsApplies(a.nspid))
		mark = InsertNewKeys(&a, items, n);
	for (int i = 0; i < n; i++)
	{
		BatchItem  *item = &items[i];
		Datum		values[IDEM_CLAIM_NCOLUMNS + 1];
		bool		nulls[IDEM_CLAIM_NCOLUMNS + 1];
		MemoryContext old;
		int			item_pin = -1;

		CHECK_FOR_INTERRUPTS();
		context.arg = item;
		a.key = item->key;
		a.hash = item->hash;
		if (!(i > 0 && IdemCompareKeys(item->key, items[i - 1].key) == 0))
			key_wrote = false;	/* the first item of its key (items are sorted) */
		if (item->token != 0)
		{
			PackNew(&a, item, claim_desc, values + 1, nulls + 1);
			key_wrote = true;
		}
		else
		{
			/* a connection of its own, so that what the claim read goes with it */
			item_pin = IdemConnect();
			(void) IdemClaim(&a, claim_desc, values + 1, nulls + 1);
			key_wrote = key_wrote || a.wrote;
		}

		/*
		 * A key InsertNewKeys locked that IdemClaim only read (a replay,
		 * in_progress, a mismatch): let go of its lock, as a single claim
		 * that reads a key takes none, so that another batch replaying the
		 * key does not wait for this transaction.  A key given twice is
		 * decided at its last item: let go of after an earlier one only
		 * read it, the lock could be taken by another batch (holding, or
		 * waiting for, a later key of this one) before a later item, with
		 * another request, takes the row over and takes the lock again: a
		 * cycle.  The lock of a row any of its items wrote stays.
		 */
		if (mark >= 0 && !key_wrote &&
			!(i + 1 < n && IdemCompareKeys(item->key, items[i + 1].key) == 0))
			IdemUnlockKeySince(&a, mark);
		values[0] = PointerGetDatum(item->key);
		nulls[0] = false;
		/* the row about to be kept, counted before it is */
		answer_bytes += HEAPTUPLESIZE + SizeofHeapTupleHeader + BITMAPLEN(IDEM_CLAIM_NCOLUMNS + 1) +
			heap_compute_data_size(rsinfo->setDesc, values, nulls);
		if (answer_bytes > BATCH_MAX_ANSWER_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the stored responses and recovery points of the batch's keys are too large to answer in one call"),
					 errdetail("A batch answers with at most %zu MB, counting each stored response and recovery point at its full (decompressed) size.",
							   BATCH_MAX_ANSWER_BYTES / (1024 * 1024)),
					 errhint("Claim these keys in smaller batches, or one by one.")));
		/* formed outside SPI's memory, which SPI_finish frees */
		old = MemoryContextSwitchTo(callcxt);
		rows[item->index] = heap_form_tuple(rsinfo->setDesc, values, nulls);
		MemoryContextSwitchTo(old);
		if (item_pin >= 0)
			IdemFinish(item_pin);
	}
	/* every lease written counts from after the batch's last wait */
	(void) IdemStampEnd(&a.stamp, a.nspid);
	IdemFinish(pin);
	error_context_stack = context.previous;

	for (int i = 0; i < n; i++)
	{
		tuplestore_puttuple(rsinfo->setResult, rows[i]);
		heap_freetuple(rows[i]);	/* copied, or written out past work_mem */
	}
	return (Datum) 0;
}
