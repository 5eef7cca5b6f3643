/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  Background expiry: a launcher, and one short-lived worker per database
 *	  and pass.
 *
 * The launcher is a static background worker, registered when the library
 * is preloaded and started once recovery has finished: on a hot standby
 * nothing runs, and after promotion the postmaster starts it.  It connects
 * to no database (it reads only the shared catalog pg_database).  Every
 * idempotency.worker_interval it starts, for each database named in
 * idempotency.worker_databases that exists and accepts connections, a
 * dynamic worker that makes one pass of expiry there and exits, unless the
 * previous one for that database is still running.
 *
 * Short-lived workers keep the design simple and hard to break: no worker
 * stays connected, so DROP DATABASE is not blocked, and a database that is
 * dropped or renamed is simply not started again (no FATAL loop).  A pass
 * that fails logs its error once, counts it in idempotency_stats, and the
 * next interval tries again.  A database without the extension gets a pass
 * that finds no extension and exits at DEBUG1: nothing in the log.
 *
 * A pass runs IdemExpireBatch (expire.c) in batches of at most
 * idempotency.worker_batch_size rows, each batch its own short transaction
 * with lock_timeout and statement_timeout set, until a batch changes fewer
 * rows than that.  SKIP LOCKED in the batch statements means expiry never
 * waits behind a claim and never touches a row a live transaction uses.
 *
 * Privileges: on PostgreSQL 15 a background worker can only connect as a
 * role that may log in, and the extension's roles cannot; so the worker
 * connects as the bootstrap superuser and runs each batch as
 * idempotency_admin (SetUserIdAndSecContext), which holds just the table
 * privileges expiry needs.  If that role is missing it stays superuser.
 *
 * SIGHUP re-reads the settings (the list of databases, interval, batch
 * size); SIGTERM ends the launcher or a worker at the next interrupt check.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "idempotency.h"

PGDLLEXPORT void idem_launcher_main(Datum main_arg);
PGDLLEXPORT void idem_worker_main(Datum main_arg);

/* GUCs */
static char *idem_worker_databases = NULL;
static int	idem_worker_interval = 10000;	/* ms */
static int	idem_worker_batch_size = 1000;

/* How long a batch may wait for a lock, or run */
#define WORKER_LOCK_TIMEOUT "1000"
#define WORKER_STATEMENT_TIMEOUT "60000"

/* Databases the launcher keeps at most one worker running for */
#define MAX_WORKER_DATABASES 64

typedef struct RunningWorker
{
	Oid			dboid;
	BackgroundWorkerHandle *handle;
} RunningWorker;

static RunningWorker running[MAX_WORKER_DATABASES];

/*
 * Define the worker's settings and, when preloading, register the launcher.
 */
void
IdemWorkerInit(void)
{
	BackgroundWorker worker;

	DefineCustomStringVariable("idempotency.worker_databases",
							   "Databases the background worker expires keys in.",
							   "A comma-separated list of database names. Databases without the extension are skipped quietly.",
							   &idem_worker_databases,
							   "postgres",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.worker_interval",
							"Time between two expiry passes of the background worker.",
							NULL,
							&idem_worker_interval,
							10000, 100, 24 * 60 * 60 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("idempotency.worker_batch_size",
							"Most rows one expiry transaction of the background worker changes.",
							NULL,
							&idem_worker_batch_size,
							1000, 1, 1000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "idempotency");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "idem_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "idempotency launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "idempotency launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * The OID of a database a worker may connect to, or InvalidOid.  Called in
 * a transaction.  A sequential scan of pg_database: the launcher is
 * connected to no database and may run before the shared relcache init
 * file exists, so it must not depend on pg_database's indexes.
 */
static Oid
ConnectableDatabase(const char *name)
{
	Relation	rel = table_open(DatabaseRelationId, AccessShareLock);
	TableScanDesc scan = table_beginscan_catalog(rel, 0, NULL);
	HeapTuple	tup;
	Oid			dboid = InvalidOid;

	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (strcmp(NameStr(db->datname), name) == 0)
		{
			if (db->datallowconn)
				dboid = db->oid;
			break;
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return dboid;
}

/* Is a worker for this database still running? */
static RunningWorker *
RunningSlot(Oid dboid, bool *busy)
{
	RunningWorker *free_slot = NULL;

	*busy = false;
	for (int i = 0; i < MAX_WORKER_DATABASES; i++)
	{
		RunningWorker *w = &running[i];
		pid_t		pid;

		if (w->handle != NULL &&
			GetBackgroundWorkerPid(w->handle, &pid) == BGWH_STOPPED)
		{
			pfree(w->handle);
			w->handle = NULL;
		}
		if (w->handle != NULL && w->dboid == dboid)
		{
			*busy = true;
			return w;
		}
		if (w->handle == NULL && free_slot == NULL)
			free_slot = w;
	}
	return free_slot;
}

/*
 * Start a pass in every configured database that has none running.
 */
static void
LaunchPasses(void)
{
	char	   *names;
	List	   *list;
	ListCell   *lc;

	names = pstrdup(idem_worker_databases ? idem_worker_databases : "");
	if (!SplitIdentifierString(names, ',', &list))
	{
		ereport(LOG,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid list syntax in idempotency.worker_databases")));
		return;
	}

	foreach(lc, list)
	{
		const char *name = (const char *) lfirst(lc);
		BackgroundWorker worker;
		RunningWorker *slot;
		bool		busy;
		Oid			dboid;

		CHECK_FOR_INTERRUPTS();
		StartTransactionCommand();
		dboid = ConnectableDatabase(name);
		CommitTransactionCommand();
		if (!OidIsValid(dboid))
		{
			ereport(DEBUG1,
					(errmsg("idempotency: database \"%s\" does not exist or does not accept connections", name)));
			continue;
		}

		slot = RunningSlot(dboid, &busy);
		if (busy)
			continue;			/* the last pass there is still running */
		if (slot == NULL)
		{
			ereport(LOG,
					(errmsg("idempotency: more than %d databases in idempotency.worker_databases",
							MAX_WORKER_DATABASES)));
			break;
		}

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = BGW_NEVER_RESTART;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "idempotency");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "idem_worker_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "idempotency worker for database %s", name);
		snprintf(worker.bgw_type, BGW_MAXLEN, "idempotency worker");
		worker.bgw_main_arg = ObjectIdGetDatum(dboid);
		worker.bgw_notify_pid = MyProcPid;

		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
			BackgroundWorkerHandle *handle;

			if (RegisterDynamicBackgroundWorker(&worker, &handle))
			{
				slot->dboid = dboid;
				slot->handle = handle;
			}
			else
				ereport(LOG,
						(errmsg("idempotency: could not start a worker for database \"%s\"", name),
						 errhint("Raise max_worker_processes.")));
			MemoryContextSwitchTo(old);
		}
	}
	list_free(list);
	pfree(names);
}

/*
 * The launcher: start passes every interval until told to stop.
 */
void
idem_launcher_main(Datum main_arg)
{
	TimestampTz last_launch = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("idempotency launcher");
	ereport(LOG, (errmsg("idempotency launcher started")));

	for (;;)
	{
		TimestampTz now;
		long		wait_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/*
		 * The latch is also set when a worker stops (bgw_notify_pid) and on
		 * SIGHUP: start passes only once an interval has gone by.
		 */
		now = GetCurrentTimestamp();
		if (TimestampDifferenceExceeds(last_launch, now, idem_worker_interval))
		{
			LaunchPasses();
			last_launch = now;
		}
		wait_ms = idem_worker_interval -
			TimestampDifferenceMilliseconds(last_launch, GetCurrentTimestamp());

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(wait_ms, 1),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * The schema of the extension in this database, or InvalidOid when it is
 * not installed.  Called inside SPI.
 */
static Oid
ExtensionSchema(void)
{
	bool		isnull;
	Datum		d;

	if (SPI_execute("SELECT extnamespace FROM pg_catalog.pg_extension"
					" WHERE extname OPERATOR(pg_catalog.=) 'idempotency'",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the idempotency extension");
	if (SPI_processed == 0)
		return InvalidOid;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? InvalidOid : DatumGetObjectId(d);
}

/*
 * One batch in its own transaction; returns the rows it changed, or -1
 * when the extension is not installed here.
 */
static int
ExpireBatch(int batch_size)
{
	IdemExpireResult done = {0, 0};
	Oid			nspid;
	Oid			admin;
	Oid			save_userid;
	int			save_sec;
	int			changed = -1;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "idempotency expiry batch");

	(void) set_config_option("lock_timeout", WORKER_LOCK_TIMEOUT, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	(void) set_config_option("statement_timeout", WORKER_STATEMENT_TIMEOUT, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);

	SPI_connect();
	nspid = ExtensionSchema();
	if (OidIsValid(nspid))
	{
		/* the work runs with idempotency_admin's privileges only */
		admin = get_role_oid("idempotency_admin", true);
		GetUserIdAndSecContext(&save_userid, &save_sec);
		if (OidIsValid(admin))
			SetUserIdAndSecContext(admin, save_sec | SECURITY_LOCAL_USERID_CHANGE);
		changed = IdemExpireBatch(nspid, GetCurrentTimestamp(), batch_size, &done);
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	SPI_finish();

	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);

	if (changed > 0)
		ereport(DEBUG1,
				(errmsg("idempotency: expired %lld stale claims, deleted %lld rows",
						(long long) done.expired, (long long) done.deleted)));
	return changed;
}

/*
 * A worker: one pass of expiry in its database, then exit.
 */
void
idem_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("idempotency worker");

	PG_TRY();
	{
		for (;;)
		{
			int			batch = idem_worker_batch_size;
			int			changed;

			CHECK_FOR_INTERRUPTS();
			if (ConfigReloadPending)
			{
				ConfigReloadPending = false;
				ProcessConfigFile(PGC_SIGHUP);
			}
			changed = ExpireBatch(batch);
			if (changed < 0)
			{
				ereport(DEBUG1,
						(errmsg("idempotency: extension not installed in this database, nothing to expire")));
				proc_exit(0);
			}
			if (changed < batch)
				break;
		}
		IdemStatsWorkerPass(GetCurrentTimestamp());
	}
	PG_CATCH();
	{
		/* counted, then logged once as the worker exits; the next pass retries */
		IdemStatsAdd(IDEM_STAT_WORKER_ERRORS, 1);
		PG_RE_THROW();
	}
	PG_END_TRY();

	proc_exit(0);
}
