/*-------------------------------------------------------------------------
 *
 * expire.c
 *	  Expiry: stale processing claims made takeover-ready, rows past
 *	  expires_at deleted.  idem_expire() runs it by hand; the background
 *	  worker runs the same batches, each in a short transaction of its own.
 *
 * A batch touches at most batch_size rows, found through the due_at index
 * (the rows whose lease or retention may have ended), so its cost follows
 * the rows due, not the table's size.  Rows are locked with SKIP LOCKED: expiry never waits
 * behind a claim and never touches a row a live transaction is using, and
 * a claim made in a still-open transaction is invisible to it.
 *
 * Under idempotency.stale_policy = 'hold' stale processing claims are left
 * for an operator (idem_resolve), and so are processing rows past
 * expires_at: deleting them would let a second attempt start.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "common.h"
#include "settings.h"
#include "store.h"
#include "expire.h"
#include "stats.h"
#include "citus/citus.h"

PG_FUNCTION_INFO_V1(idem_expire);

/* Rows a batch of idem_expire() handles at most, of each kind */
#define EXPIRE_SQL_BATCH 10000


/* Run an expiry statement on the table (relation NULL) or on one shard */
static int
ExpireOn(IdemStmt stmt, Oid nspid, const char *relation, const IdemArgs *args)
{
	if (relation == NULL)
		return IdemExecute(stmt, nspid, args, false, 0);
	return IdemExecuteOn(stmt, relation, args);
}

/*
 * One batch of expiry in the extension's schema nspid, as of now, on the
 * table or, on a Citus node, on this node's shards of it: the rows due,
 * at most batch_size in all, each deleted, expired, or given its next due
 * time (IDEM_STMT_EXPIRE_DUE).  Adds what it
 * did to result and returns the rows it changed (all three kinds).  The
 * caller is connected to SPI.  skip_locked (the background worker): on a
 * Citus node, the table or a shard another transaction holds locked (being
 * distributed, moved, dropped) is left for the next pass rather than waited
 * for (IdemCitusExpiryTargets); without Citus it changes nothing.
 */
int
IdemExpireBatch(Oid nspid, TimestampTz now, int batch_size, bool skip_locked,
				IdemExpireResult *result)
{
	bool		reclaim = (idem_stale_policy == IDEM_STALE_RECLAIM);
	IdemArgs	args = {.given = 0};
	int64		done[3] = {0, 0, 0};	/* expired, deleted, rekeyed */
	int			total = 0;
	List	   *targets = NIL;
	ListCell   *lc;

	switch (IdemCitusExpiryTargets(nspid, IdemKeysRelid(nspid), skip_locked, &targets))
	{
		case IDEM_EXPIRY_TABLE:
			targets = list_make1(NULL);
			break;
		case IDEM_EXPIRY_SHARDS:
			if (targets == NIL)
				return 0;		/* this node holds no shard, or none free */
			break;
		case IDEM_EXPIRY_SKIP:
			return 0;			/* the table is changing: next pass */
	}

	IdemArg(&args, IDEM_PARAM_NOW, TimestampTzGetDatum(now));
	IdemArg(&args, IDEM_PARAM_RECLAIM, BoolGetDatum(reclaim));
	foreach(lc, targets)
	{
		const char *relation = (const char *) lfirst(lc);

		if (total >= batch_size)
			break;
		if (IdemKeysHaveDueAt(nspid))
		{
			bool		isnull;

			IdemArg(&args, IDEM_PARAM_BATCH_SIZE, Int64GetDatum(batch_size - total));
			ExpireOn(reclaim ? IDEM_STMT_EXPIRE_DUE_RECLAIM : IDEM_STMT_EXPIRE_DUE,
					 nspid, relation, &args);
			for (int i = 0; i < 3; i++)
			{
				int			col = i == 0 ? 2 : i == 1 ? 1 : 3;	/* gone, stale, later */
				int64		n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
															SPI_tuptable->tupdesc, col, &isnull));

				done[i] += n;
				total += (int) n;
			}
			continue;
		}

		/* a 0.2.0 table, not updated yet: its two statements */
		for (int i = 0; i < 2 && total < batch_size; i++)
		{
			int			n;

			if (i == 0 && !reclaim)
				continue;
			IdemArg(&args, IDEM_PARAM_BATCH_SIZE, Int64GetDatum(batch_size - total));
			n = ExpireOn(i == 0 ? IDEM_STMT_EXPIRE_STALE : IDEM_STMT_EXPIRE_DELETE,
						 nspid, relation, &args);
			done[i] += n;
			total += n;
		}
	}
	result->expired += done[0];
	result->deleted += done[1];
	result->rekeyed += done[2];
	IdemStatsAdd(IDEM_STAT_EXPIRED, done[0]);
	IdemStatsAdd(IDEM_STAT_DELETED, done[1]);
	IdemStatsBatch(total);
	return total;
}

/*
 * idem_expire(max_rows): one pass of expiry in this database, in the
 * caller's transaction; returns the rows expired and deleted (rows only
 * given their next due time are not counted).  max_rows bounds the rows
 * changed of all kinds; NULL means no limit.
 */
Datum
idem_expire(PG_FUNCTION_ARGS)
{
	int			pin;
	int64		limit = PG_ARGISNULL(0) ? PG_INT64_MAX : PG_GETARG_INT32(0);
	int64		total = 0;
	IdemExpireResult done = {0, 0, 0};
	Oid			nspid = IdemNamespaceOf(fcinfo);
	TimestampTz now = GetCurrentTimestamp();

	if (limit <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_rows must be positive"),
				 errhint("Leave it NULL for no limit.")));
	PreventCommandIfReadOnly("idem_expire()");

	pin = IdemConnect();
	while (total < limit)
	{
		int			batch = (int) Min(limit - total, EXPIRE_SQL_BATCH);
		int			changed;

		CHECK_FOR_INTERRUPTS();
		changed = IdemExpireBatch(nspid, now, batch, false, &done);
		total += changed;
		if (changed < batch)
			break;				/* nothing more is due */
	}
	IdemFinish(pin);

	PG_RETURN_INT64(done.expired + done.deleted);
}
