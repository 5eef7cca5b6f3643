/*-------------------------------------------------------------------------
 *
 * expire.c
 *	  Expiry: stale processing claims made takeover-ready, rows past
 *	  expires_at deleted.  idem_expire() runs it by hand; the background
 *	  worker runs the same batches, each in a short transaction of its own.
 *
 * A batch touches at most batch_size rows of each kind, found through the
 * lease and expires_at indexes, so its cost follows the rows due, not the
 * table's size.  Rows are locked with SKIP LOCKED: expiry never waits
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

#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/timestamp.h"

#include "idempotency.h"

PG_FUNCTION_INFO_V1(idem_expire);

/* Rows a batch of idem_expire() handles at most, of each kind */
#define EXPIRE_SQL_BATCH 10000

/*
 * One batch of expiry in the extension's schema nspid, as of now: stale
 * claims expired first, then rows deleted, at most batch_size rows in all.
 * Adds what it did to result and returns the rows it changed.  The caller
 * is connected to SPI.
 */
int
IdemExpireBatch(Oid nspid, TimestampTz now, int batch_size,
				IdemExpireResult *result)
{
	bool		reclaim = (idem_stale_policy == IDEM_STALE_RECLAIM);
	Datum		args[3];
	int			expired = 0;
	int			deleted = 0;

	args[0] = TimestampTzGetDatum(now);
	args[1] = Int64GetDatum(batch_size);
	args[2] = BoolGetDatum(reclaim);

	if (reclaim)
		expired = IdemExecute(IDEM_STMT_EXPIRE_STALE, nspid, args, NULL, false, 0);
	if (expired < batch_size)
	{
		args[1] = Int64GetDatum(batch_size - expired);
		deleted = IdemExecute(IDEM_STMT_EXPIRE_DELETE, nspid, args, NULL, false, 0);
	}
	result->expired += expired;
	result->deleted += deleted;
	IdemStatsAdd(IDEM_STAT_EXPIRED, expired);
	IdemStatsAdd(IDEM_STAT_DELETED, deleted);
	IdemStatsBatch(expired + deleted);
	return expired + deleted;
}

/*
 * idem_expire(max_rows): one pass of expiry in this database, in the
 * caller's transaction; returns the rows changed.  NULL means no limit.
 */
Datum
idem_expire(PG_FUNCTION_ARGS)
{
	int64		limit = PG_ARGISNULL(0) ? PG_INT64_MAX : PG_GETARG_INT32(0);
	int64		total = 0;
	Oid			nspid = IdemNamespaceOf(fcinfo);
	TimestampTz now = GetCurrentTimestamp();

	if (limit <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_rows must be positive"),
				 errhint("Leave it NULL for no limit.")));
	PreventCommandIfReadOnly("idem_expire()");

	SPI_connect();
	while (total < limit)
	{
		IdemExpireResult done = {0, 0};
		int			batch = (int) Min(limit - total, EXPIRE_SQL_BATCH);
		int			changed;

		CHECK_FOR_INTERRUPTS();
		changed = IdemExpireBatch(nspid, now, batch, &done);
		total += changed;
		if (changed < batch)
			break;				/* nothing more is due */
	}
	SPI_finish();

	PG_RETURN_INT64(total);
}
