/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters of what the extension did, per database, for the
 *	  idempotency_stats view.
 *
 * The counters live in shared memory, one set per database, and are plain
 * atomics: counting costs a claim one lock-free add and never blocks.  The
 * sets are slots of a fixed array, idempotency.stats_max_databases of them
 * (shared memory is sized at postmaster start); a backend finds its
 * database's slot the first time it counts, taking the slot table's lock
 * only for that, and keeps the pointer.  A database that finds every slot
 * taken counts into one shared set, "other databases", shown by
 * idem_stats_databases() with no database and by idempotency_stats there
 * as NULL; the server logs that once.  idem_stats_reset() frees the slots
 * of dropped databases.  A backend never has its slot freed under it: a
 * database is dropped only with no backend connected to it.  DROP DATABASE,
 * when it commits, marks the database's slot dropped (an object access
 * hook, in every backend since the library is preloaded): its counters are
 * still shown, with no name, until a reset frees the slot, but a database
 * created later with the same OID (CREATE DATABASE ... OID, or OIDs
 * wrapping around) takes a slot of its own and starts from zero.
 *
 * Like pg_stat_statements's, the counters are not transactional (a claim
 * that rolls back was still counted).  Unlike its, they are lost at every
 * server restart (and at a crash's reinitialisation).  Shared memory can only be had when the
 * library is preloaded; without shared_preload_libraries the counters are
 * not kept and the view shows NULL for them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "common.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(idem_stats);
PG_FUNCTION_INFO_V1(idem_stats_databases);
PG_FUNCTION_INFO_V1(idem_stats_reset);

#define STATS_TRANCHE	"idempotency stats"

/* One database's counters */
typedef struct IdemDbStats
{
	Oid			dbid;			/* InvalidOid: slot free; under the lock */
	bool		dropped;		/* dbid was dropped; under the lock */
	pg_atomic_uint64 counters[IDEM_NUM_STATS];
	pg_atomic_uint64 max_batch_rows;	/* largest expiry batch */
	pg_atomic_uint64 last_pass;		/* TimestampTz of the worker's last pass */
	pg_atomic_uint64 reset_at;		/* TimestampTz of the last reset */
} IdemDbStats;

typedef struct IdemSharedStats
{
	LWLock	   *lock;			/* taking a slot, freeing one */
	TimestampTz started;		/* shared memory made: counting began */
	int			nslots;
	pg_atomic_uint32 full_logged;	/* the "slots full" LOG was written */
	IdemDbStats other;			/* databases that found no slot */
	IdemDbStats slots[FLEXIBLE_ARRAY_MEMBER];
} IdemSharedStats;

/* Columns of idem_stats() after the counters of 0.3.0 */
#define STATS_MIDDLE_COLUMNS	3	/* max_batch_rows, worker_last_pass, stats_reset */
#define STATS_COLUMNS_0_3	(IDEM_NUM_STATS_0_3 + STATS_MIDDLE_COLUMNS)
#define STATS_COLUMNS		(IDEM_NUM_STATS + STATS_MIDDLE_COLUMNS)

static int	idem_stats_max_databases = 64;
static IdemSharedStats *idem_stats_shared = NULL;

/* This backend's counters (NULL until it first counts), and for which database */
static IdemDbStats *my_stats = NULL;
static Oid	my_stats_db = InvalidOid;

/* A database this transaction drops, its slot marked when it commits */
static Oid	dropping_db = InvalidOid;
static object_access_hook_type prev_object_access_hook = NULL;

static void
StatsObjectAccess(ObjectAccessType access, Oid classId, Oid objectId,
				  int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access == OAT_DROP && classId == DatabaseRelationId)
		dropping_db = objectId;
}

static void
StatsXactCallback(XactEvent event, void *arg)
{
	if (!OidIsValid(dropping_db))
		return;
	if (event == XACT_EVENT_COMMIT && idem_stats_shared != NULL)
	{
		LWLockAcquire(idem_stats_shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < idem_stats_shared->nslots; i++)
			if (idem_stats_shared->slots[i].dbid == dropping_db)
				idem_stats_shared->slots[i].dropped = true;
		LWLockRelease(idem_stats_shared->lock);
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT)
		dropping_db = InvalidOid;
}

/* Define idempotency.stats_max_databases; _PG_init calls it */
void
IdemStatsInit(void)
{
	/*
	 * A PGC_POSTMASTER setting can be defined only while the postmaster
	 * loads the library: loaded later (CREATE EXTENSION or a function's
	 * first call without shared_preload_libraries), defining it would end
	 * the session.  There are no counters then, and nothing for it to size.
	 */
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("idempotency.stats_max_databases",
							"Databases whose idempotency counters are kept apart.",
							"Databases beyond it are counted together, as other databases. Sizes shared memory at server start.",
							&idem_stats_max_databases,
							64, 1, 10000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
	prev_object_access_hook = object_access_hook;
	object_access_hook = StatsObjectAccess;
	RegisterXactCallback(StatsXactCallback, NULL);
}

/* The counters' shared memory (shmem.c asks for it) */
Size
IdemStatsShmemSize(void)
{
	return MAXALIGN(add_size(offsetof(IdemSharedStats, slots),
							 mul_size(idem_stats_max_databases, sizeof(IdemDbStats))));
}

/* The slot table's lock (shmem.c's request hook) */
void
IdemStatsShmemRequest(void)
{
	RequestNamedLWLockTranche(STATS_TRANCHE, 1);
}

/*
 * Zero one set of counters, stats_reset set to since; worker_last_pass,
 * not a counter, is left as it is (init: made NULL).
 */
static void
ZeroStats(IdemDbStats *s, TimestampTz since, bool init)
{
	for (int i = 0; i < IDEM_NUM_STATS; i++)
	{
		if (init)
			pg_atomic_init_u64(&s->counters[i], 0);
		else
			pg_atomic_write_u64(&s->counters[i], 0);
	}
	if (init)
	{
		pg_atomic_init_u64(&s->max_batch_rows, 0);
		pg_atomic_init_u64(&s->last_pass, 0);
		pg_atomic_init_u64(&s->reset_at, (uint64) since);
	}
	else
	{
		pg_atomic_write_u64(&s->max_batch_rows, 0);
		pg_atomic_write_u64(&s->reset_at, (uint64) since);
	}
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
										IdemStatsShmemSize(), &found);
	if (!found)
	{
		idem_stats_shared->lock = &(GetNamedLWLockTranche(STATS_TRANCHE))->lock;
		idem_stats_shared->started = GetCurrentTimestamp();
		idem_stats_shared->nslots = idem_stats_max_databases;
		pg_atomic_init_u32(&idem_stats_shared->full_logged, 0);
		idem_stats_shared->other.dbid = InvalidOid;
		ZeroStats(&idem_stats_shared->other, idem_stats_shared->started, true);
		for (int i = 0; i < idem_stats_shared->nslots; i++)
		{
			idem_stats_shared->slots[i].dbid = InvalidOid;
			idem_stats_shared->slots[i].dropped = false;
			ZeroStats(&idem_stats_shared->slots[i], idem_stats_shared->started, true);
		}
	}
}

/* The slot of database dbid, or NULL; the caller holds the lock */
static IdemDbStats *
FindSlot(Oid dbid)
{
	for (int i = 0; i < idem_stats_shared->nslots; i++)
		if (idem_stats_shared->slots[i].dbid == dbid &&
			!idem_stats_shared->slots[i].dropped)
			return &idem_stats_shared->slots[i];
	return NULL;
}

/*
 * This backend's database's counters, found or taken the first time; the
 * shared "other databases" set when every slot is taken (or when not
 * connected to a database).  NULL when the counters are not kept.
 */
static IdemDbStats *
MyStatsSlow(void)
{
	IdemDbStats *s;
	bool		full = false;

	if (idem_stats_shared == NULL)
		return NULL;
	if (!OidIsValid(MyDatabaseId))
		return &idem_stats_shared->other;

	LWLockAcquire(idem_stats_shared->lock, LW_SHARED);
	s = FindSlot(MyDatabaseId);
	LWLockRelease(idem_stats_shared->lock);
	if (s == NULL)
	{
		LWLockAcquire(idem_stats_shared->lock, LW_EXCLUSIVE);
		s = FindSlot(MyDatabaseId);
		if (s == NULL)
		{
			s = FindSlot(InvalidOid);
			if (s != NULL)
			{
				/* counting in this database began at server start */
				ZeroStats(s, idem_stats_shared->started, false);
				pg_atomic_write_u64(&s->last_pass, 0);
				s->dbid = MyDatabaseId;
				s->dropped = false;
			}
		}
		LWLockRelease(idem_stats_shared->lock);
		if (s == NULL)
		{
			s = &idem_stats_shared->other;
			full = true;
		}
	}
	my_stats = s;
	my_stats_db = MyDatabaseId;

	if (full && pg_atomic_exchange_u32(&idem_stats_shared->full_logged, 1) == 0)
		ereport(LOG,
				(errmsg("idempotency: database %u is counted with other databases: all %d statistics slots are taken",
						MyDatabaseId, idem_stats_shared->nslots),
				 errhint("Raise idempotency.stats_max_databases, or run idem_stats_reset() to free the slots of dropped databases.")));
	return s;
}

static inline IdemDbStats *
MyStats(void)
{
	if (likely(my_stats != NULL && my_stats_db == MyDatabaseId))
		return my_stats;
	return MyStatsSlow();
}

/*
 * Find this backend's counters now, outside any error path: the worker
 * calls it once connected, so that counting its failure takes no lock.
 */
void
IdemStatsPrepare(void)
{
	(void) MyStats();
}

/* Count n events in this database */
void
IdemStatsAdd(IdemStat stat, int64 n)
{
	IdemDbStats *s;

	if (n <= 0)
		return;
	s = MyStats();
	if (s != NULL)
		pg_atomic_fetch_add_u64(&s->counters[stat], (uint64) n);
}

/* Remember the largest expiry batch */
void
IdemStatsBatch(int64 rows)
{
	IdemDbStats *s = MyStats();
	uint64		seen;

	if (s == NULL)
		return;
	seen = pg_atomic_read_u64(&s->max_batch_rows);
	while ((uint64) rows > seen &&
		   !pg_atomic_compare_exchange_u64(&s->max_batch_rows, &seen, (uint64) rows))
		;
}

/* The worker finished a pass in this database */
void
IdemStatsWorkerPass(TimestampTz end)
{
	IdemDbStats *s = MyStats();

	if (s == NULL)
		return;
	pg_atomic_fetch_add_u64(&s->counters[IDEM_STAT_WORKER_PASSES], 1);
	pg_atomic_write_u64(&s->last_pass, (uint64) end);
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
 * One set of counters as columns: the counters of 0.3.0, max_batch_rows,
 * worker_last_pass, stats_reset, then the counters added since (when
 * ncols says the declaration has them).  s NULL: all NULL.
 */
static void
FillStats(IdemDbStats *s, int ncols, Datum *values, bool *nulls)
{
	int			c = 0;

	if (s == NULL)
	{
		memset(nulls, true, sizeof(bool) * ncols);
		return;
	}
	memset(nulls, false, sizeof(bool) * ncols);
	for (int i = 0; i < IDEM_NUM_STATS_0_3; i++)
		values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->counters[i]));
	values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->max_batch_rows));
	values[c] = TimestampOrNull(&s->last_pass, &nulls[c]);
	c++;
	values[c] = TimestampOrNull(&s->reset_at, &nulls[c]);
	c++;
	for (int i = IDEM_NUM_STATS_0_3; i < IDEM_NUM_STATS && c < ncols; i++)
		values[c++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->counters[i]));
}

/* The row type of a function returning counters, checked: its columns */
static TupleDesc
StatsRowType(FunctionCallInfo fcinfo, int lead)
{
	TupleDesc	desc;
	int			n;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	/* a declaration of any version: the counters of 0.3.0, and some after */
	n = desc->natts - lead;
	if (n < STATS_COLUMNS_0_3 || n > STATS_COLUMNS)
		elog(ERROR, "idempotency statistics function returns %d columns, expected %d",
			 desc->natts, lead + STATS_COLUMNS);
	return desc;
}

/*
 * idem_stats(): this database's counters as one row; all NULL when the
 * library was not preloaded, or when the database found no slot (counted
 * with other databases).  A database that counted nothing yet: zeros.
 * Its declaration before 0.4.0 has the counters of 0.3.0 only.
 */
Datum
idem_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	desc = BlessTupleDesc(StatsRowType(fcinfo, 0));
	Datum		values[STATS_COLUMNS];
	bool		nulls[STATS_COLUMNS];
	IdemDbStats *s = NULL;
	IdemDbStats zero;

	if (idem_stats_shared != NULL)
	{
		LWLockAcquire(idem_stats_shared->lock, LW_SHARED);
		s = FindSlot(MyDatabaseId);
		if (s == NULL && FindSlot(InvalidOid) != NULL)
		{
			/* nothing counted here yet, and a slot is free for it */
			ZeroStats(&zero, idem_stats_shared->started, true);
			s = &zero;
		}
		/* else every slot is taken by others: counted with other databases */
		if (s != NULL)
			FillStats(s, desc->natts, values, nulls);
		LWLockRelease(idem_stats_shared->lock);
	}
	if (s == NULL)
		FillStats(NULL, desc->natts, values, nulls);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/*
 * idem_stats_databases(): a row per database with counters (dbid, datname,
 * then idem_stats()'s columns), and one with dbid and datname NULL for the
 * databases that found no slot, when there were any.  A dropped
 * database's row stays, datname NULL, until idem_stats_reset() frees it.
 * No rows when the library was not preloaded.
 */
Datum
idem_stats_databases(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	desc;
	Oid		   *dbids;
	int		   *slots;
	bool	   *dropped;
	int			n = 0;

	(void) StatsRowType(fcinfo, 2);
	InitMaterializedSRF(fcinfo, 0);
	desc = rsinfo->setDesc;
	if (idem_stats_shared == NULL)
		PG_RETURN_VOID();

	/*
	 * The slots in use first, under the lock; the names after (catalog
	 * reads), none for a dropped database (its OID may be another's now).
	 */
	dbids = palloc(sizeof(Oid) * (idem_stats_shared->nslots + 1));
	slots = palloc(sizeof(int) * (idem_stats_shared->nslots + 1));
	dropped = palloc(sizeof(bool) * (idem_stats_shared->nslots + 1));
	LWLockAcquire(idem_stats_shared->lock, LW_SHARED);
	for (int i = 0; i < idem_stats_shared->nslots; i++)
		if (OidIsValid(idem_stats_shared->slots[i].dbid))
		{
			slots[n] = i;
			dropped[n] = idem_stats_shared->slots[i].dropped;
			dbids[n++] = idem_stats_shared->slots[i].dbid;
		}
	LWLockRelease(idem_stats_shared->lock);
	if (pg_atomic_read_u32(&idem_stats_shared->full_logged) != 0)
		dbids[n++] = InvalidOid;

	for (int i = 0; i < n; i++)
	{
		Datum		values[2 + STATS_COLUMNS];
		bool		nulls[2 + STATS_COLUMNS];
		char	   *name = OidIsValid(dbids[i]) && !dropped[i] ? get_database_name(dbids[i]) : NULL;

		CHECK_FOR_INTERRUPTS();
		if (OidIsValid(dbids[i]))
		{
			IdemDbStats *s = &idem_stats_shared->slots[slots[i]];
			bool		same;

			LWLockAcquire(idem_stats_shared->lock, LW_SHARED);
			same = s->dbid == dbids[i] && s->dropped == dropped[i];
			if (same)
				FillStats(s, desc->natts - 2, values + 2, nulls + 2);
			LWLockRelease(idem_stats_shared->lock);
			if (!same)
				continue;		/* freed or taken meanwhile */
		}
		else
			FillStats(&idem_stats_shared->other, desc->natts - 2, values + 2, nulls + 2);
		values[0] = ObjectIdGetDatum(dbids[i]);
		nulls[0] = !OidIsValid(dbids[i]);
		values[1] = name ? DirectFunctionCall1(namein, CStringGetDatum(name)) : (Datum) 0;
		nulls[1] = (name == NULL);
		tuplestore_putvalues(rsinfo->setResult, desc, values, nulls);
	}
	PG_RETURN_VOID();
}

/*
 * idem_stats_reset(): zero this database's counters (a database without a
 * slot: nothing to zero), and free the slots of databases dropped since.
 */
Datum
idem_stats_reset(PG_FUNCTION_ARGS)
{
	Oid		   *dbids;
	int		   *slots;
	bool	   *dropped;
	int			n = 0;
	IdemDbStats *s;

	if (idem_stats_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idempotency statistics are not kept"),
				 errhint("Add idempotency to shared_preload_libraries and restart the server.")));

	/* this database's slot, taken now so that stats_reset says when */
	s = MyStats();
	if (s != &idem_stats_shared->other)
		ZeroStats(s, GetCurrentTimestamp(), false);

	/*
	 * The slots of dropped databases (marked so, or no longer in the
	 * catalog): looked up without the lock, then freed
	 */
	dbids = palloc(sizeof(Oid) * idem_stats_shared->nslots);
	slots = palloc(sizeof(int) * idem_stats_shared->nslots);
	dropped = palloc(sizeof(bool) * idem_stats_shared->nslots);
	LWLockAcquire(idem_stats_shared->lock, LW_SHARED);
	for (int i = 0; i < idem_stats_shared->nslots; i++)
		if (OidIsValid(idem_stats_shared->slots[i].dbid))
		{
			slots[n] = i;
			dropped[n] = idem_stats_shared->slots[i].dropped;
			dbids[n++] = idem_stats_shared->slots[i].dbid;
		}
	LWLockRelease(idem_stats_shared->lock);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!dropped[i] && SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbids[i])))
			continue;
		LWLockAcquire(idem_stats_shared->lock, LW_EXCLUSIVE);
		s = &idem_stats_shared->slots[slots[i]];
		if (s->dbid == dbids[i] && s->dropped == dropped[i])
		{
			s->dbid = InvalidOid;
			s->dropped = false;
		}
		LWLockRelease(idem_stats_shared->lock);
	}
	pfree(dbids);
	PG_RETURN_VOID();
}
