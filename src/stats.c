/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters of what the extension did, for the idempotency_stats view.
 *
 * The counters live in shared memory, one set for the whole cluster, and
 * are plain atomics: counting costs a claim one lock-free add and never
 * blocks.  Like pg_stat_statements they are not transactional (a claim
 * that rolls back was still counted) and are lost at server restart.
 * Shared memory can only be had when the library is preloaded; without
 * shared_preload_libraries the counters are not kept and the view shows
 * NULL for them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "idempotency.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(idem_stats);
PG_FUNCTION_INFO_V1(idem_stats_reset);

typedef struct IdemSharedStats
{
	pg_atomic_uint64 counters[IDEM_NUM_STATS];
	pg_atomic_uint64 max_batch_rows;	/* largest expiry batch */
	pg_atomic_uint64 last_pass;		/* TimestampTz of the worker's last pass */
	pg_atomic_uint64 reset_at;		/* TimestampTz of the last reset */
} IdemSharedStats;

static IdemSharedStats *idem_stats_shared = NULL;

/* The counters' shared memory (shmem.c asks for it) */
Size
IdemStatsShmemSize(void)
{
	return MAXALIGN(sizeof(IdemSharedStats));
}

/*
 * Attach to the counters, making them at postmaster start; shmem.c calls
 * it holding AddinShmemInitLock.
 */
void
IdemStatsShmemAttach(void)
{
	bool		found;

	idem_stats_shared = ShmemInitStruct("idempotency stats",
										sizeof(IdemSharedStats), &found);
	if (!found)
	{
		for (int i = 0; i < IDEM_NUM_STATS; i++)
			pg_atomic_init_u64(&idem_stats_shared->counters[i], 0);
		pg_atomic_init_u64(&idem_stats_shared->max_batch_rows, 0);
		pg_atomic_init_u64(&idem_stats_shared->last_pass, 0);
		pg_atomic_init_u64(&idem_stats_shared->reset_at,
						   (uint64) GetCurrentTimestamp());
	}
}

/* Count n events */
void
IdemStatsAdd(IdemStat stat, int64 n)
{
	if (idem_stats_shared != NULL && n > 0)
		pg_atomic_fetch_add_u64(&idem_stats_shared->counters[stat], (uint64) n);
}

/* Remember the largest expiry batch */
void
IdemStatsBatch(int64 rows)
{
	uint64		seen;

	if (idem_stats_shared == NULL)
		return;
	seen = pg_atomic_read_u64(&idem_stats_shared->max_batch_rows);
	while ((uint64) rows > seen &&
		   !pg_atomic_compare_exchange_u64(&idem_stats_shared->max_batch_rows,
										   &seen, (uint64) rows))
		;
}

/* The worker finished a pass */
void
IdemStatsWorkerPass(TimestampTz end)
{
	if (idem_stats_shared == NULL)
		return;
	IdemStatsAdd(IDEM_STAT_WORKER_PASSES, 1);
	pg_atomic_write_u64(&idem_stats_shared->last_pass, (uint64) end);
}

/* A stored timestamp as a Datum, NULL when never set */
static Datum
TimestampOrNull(pg_atomic_uint64 *ts, bool *isnull)
{
	uint64		v = pg_atomic_read_u64(ts);

	*isnull = (v == 0);
	return TimestampTzGetDatum((TimestampTz) v);
}

/*
 * idem_stats(): the counters as one row; all NULL when the library was not
 * preloaded.
 */
Datum
idem_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[IDEM_NUM_STATS + 3];
	bool		nulls[IDEM_NUM_STATS + 3];
	int			i;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	desc = BlessTupleDesc(desc);
	if (desc->natts != IDEM_NUM_STATS + 3)
		elog(ERROR, "idem_stats() returns %d columns, expected %d",
			 desc->natts, IDEM_NUM_STATS + 3);

	if (idem_stats_shared == NULL)
	{
		memset(nulls, true, sizeof(nulls));
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
	}

	memset(nulls, false, sizeof(nulls));
	for (i = 0; i < IDEM_NUM_STATS; i++)
		values[i] = Int64GetDatum((int64) pg_atomic_read_u64(&idem_stats_shared->counters[i]));
	values[i++] = Int64GetDatum((int64) pg_atomic_read_u64(&idem_stats_shared->max_batch_rows));
	values[i] = TimestampOrNull(&idem_stats_shared->last_pass, &nulls[i]);
	i++;
	values[i] = TimestampOrNull(&idem_stats_shared->reset_at, &nulls[i]);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/*
 * idem_stats_reset(): zero the counters.
 */
Datum
idem_stats_reset(PG_FUNCTION_ARGS)
{
	if (idem_stats_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idempotency statistics are not kept"),
				 errhint("Add idempotency to shared_preload_libraries and restart the server.")));

	for (int i = 0; i < IDEM_NUM_STATS; i++)
		pg_atomic_write_u64(&idem_stats_shared->counters[i], 0);
	pg_atomic_write_u64(&idem_stats_shared->max_batch_rows, 0);
	pg_atomic_write_u64(&idem_stats_shared->reset_at, (uint64) GetCurrentTimestamp());
	PG_RETURN_VOID();
}
