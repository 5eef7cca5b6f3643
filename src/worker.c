/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  Background expiry: a launcher, and one short-lived worker per database
 *	  and pass.
 *
 * The launcher is a static background worker, registered when the library
 * is preloaded (never in binary-upgrade mode) and started once recovery has
 * finished: on a hot standby nothing runs, and after promotion the
 * postmaster starts it.  It connects to no database and reads only the
 * shared catalog pg_database.  Every idempotency.worker_interval it starts,
 * for each database named in idempotency.worker_databases that exists and
 * accepts connections, a dynamic worker that makes one pass of expiry there
 * and exits, unless the previous pass there is still running.
 *
 * Why short-lived workers rather than one worker staying in each database
 * (pg_cron's model): no worker stays connected, so DROP DATABASE waits at
 * most for a pass in progress, and a dropped, renamed or invalid database
 * is simply not visited again; a pass that fails ends its process, so an
 * error leaves no state behind; and the list of databases can change on
 * SIGHUP without starting or stopping anything.  The price is a process
 * start per database and interval, small next to the 10 s default.
 *
 * Errors.  A pass that fails (an ERROR, a FATAL while connecting, SIGTERM)
 * is logged once by its own process, as any background worker's error is;
 * an ERROR is also counted in idempotency_stats.worker_errors.  The
 * launcher learns of the failure through shared memory, where only a pass
 * that finished leaves its mark, and backs off: the next pass in that
 * database waits 2, 4, 8 ... intervals, at most WORKER_MAX_BACKOFF_MS,
 * until one succeeds.  A lasting fault thus gives a thinning trickle of log
 * lines, never a loop.  A database without the extension is a successful
 * pass that did nothing (logged at DEBUG1).
 *
 * A pass runs IdemExpireBatch (expire.c) in batches of at most
 * idempotency.worker_batch_size rows, idempotency.worker_batch_delay apart
 * (so that a backlog does not take a core from the claims), each batch its
 * own short transaction
 * with lock_timeout and a statement timeout armed, until a batch changes
 * fewer rows than that.  SKIP LOCKED in the batch statements means expiry
 * never waits behind a claim and never touches a row a live transaction
 * uses; a claim in a still-open transaction is invisible to it.  The
 * extension is looked up in every batch, in that batch's snapshot: while
 * CREATE EXTENSION (or DROP EXTENSION) has not committed, a pass sees the
 * old state and waits for nothing.  On a node of a cluster the table changes
 * under expiry (distributed, its shards moved and dropped): there a batch
 * takes the table's and each shard's lock without waiting and leaves what
 * another transaction holds for the next pass, quietly, rather than wait
 * and fail (expire.c).
 *
 * Privileges.  PostgreSQL 15 lets a background worker connect only as a
 * role that may log in (BGWORKER_BYPASS_ROLELOGINCHECK came in 17), and the
 * extension's roles are NOLOGIN.  A dedicated login role would be one more
 * thing to create, grant and keep in step with the extension in every
 * database, and a wrong one would make every pass fail.  So a pass connects
 * as the bootstrap superuser, like autovacuum, and runs the batch statements
 * as idempotency_admin, which holds only the table privileges expiry needs,
 * inside a security-restricted operation (SetUserIdAndSecContext): a
 * trigger or policy function that runs during expiry has idempotency_admin's
 * rights and cannot SET ROLE back to the superuser.  Only the look-up of the
 * extension in pg_extension runs with the session's rights.  Row level
 * security applies to idempotency_admin like to any role.
 *
 * SIGHUP re-reads the settings (the list of databases, interval, batch
 * size): the launcher at once, a running pass before its next batch.
 * SIGTERM ends the launcher or a pass at the next interrupt check; the
 * postmaster restarts the launcher WORKER_RESTART_SECONDS after it dies,
 * whether by SIGTERM, an error or a crash restart of the cluster.
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
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "compat.h"
#include "common.h"
#include "store.h"
#include "expire.h"
#include "stats.h"
#include "worker.h"

PGDLLEXPORT void idem_launcher_main(Datum main_arg);
PGDLLEXPORT void idem_worker_main(Datum main_arg);

/* GUCs */
static char *idem_worker_databases = NULL;
static int	idem_worker_interval = 10000;	/* ms */
static int	idem_worker_batch_size = 1000;
static int	idem_worker_batch_delay = 20;	/* ms */

/* How long a batch may wait for a lock, and run */
#define WORKER_LOCK_TIMEOUT "1000"
#define WORKER_STATEMENT_TIMEOUT_MS 60000

/* Longest wait after failed passes before the next attempt */
#define WORKER_MAX_BACKOFF_MS (5 * 60 * 1000)

/* Seconds before the postmaster restarts a launcher that died */
#define WORKER_RESTART_SECONDS 10

/* Most databases worker_databases may name */
#define MAX_WORKER_DATABASES 64

/*
 * datconnlimit of a database whose DROP DATABASE was interrupted
 * (DATCONNLIMIT_INVALID_DB, from 15.4); connecting to it fails.
 */
#define WORKER_INVALID_DB_CONNLIMIT (-2)

/*
 * Shared memory: for each launcher slot, the launch stamp of the latest
 * pass started there that finished.  A pass writes its own stamp on
 * success, so a failed pass (whatever way it died) leaves an older value
 * behind.
 */
typedef struct WorkerShared
{
	pg_atomic_uint64 finished[MAX_WORKER_DATABASES];
} WorkerShared;

/* What the launcher tells a pass, in bgw_extra */
typedef struct PassArgs
{
	int			slot;
	uint64		stamp;			/* launch time, unique per launch */
	char		dbname[NAMEDATALEN];	/* for messages */
} PassArgs;

/* The launcher's view of one database */
typedef struct PassSlot
{
	Oid			dboid;			/* InvalidOid: slot unused */
	BackgroundWorkerHandle *handle; /* the running pass, or NULL */
	uint64		stamp;			/* stamp of that pass */
	int			failures;		/* failed passes in a row */
	TimestampTz not_before;		/* back-off: no pass before this */
	bool		listed;			/* named in worker_databases */
} PassSlot;

static WorkerShared *worker_shared = NULL;
static PassSlot slots[MAX_WORKER_DATABASES];
static bool start_failed_logged = false;

/* In a pass: what the launcher told it */
static PassArgs pass_args;

/* The launcher's shared memory (shmem.c asks for it) */
Size
IdemWorkerShmemSize(void)
{
	return MAXALIGN(sizeof(WorkerShared));
}

/*
 * Attach to the pass flags, making them at postmaster start; shmem.c calls
 * it holding AddinShmemInitLock.
 */
void
IdemWorkerShmemAttach(void)
{
	bool		found;

	worker_shared = ShmemInitStruct("idempotency worker",
									sizeof(WorkerShared), &found);
	if (!found)
	{
		for (int i = 0; i < MAX_WORKER_DATABASES; i++)
			pg_atomic_init_u64(&worker_shared->finished[i], 0);
	}
}

/*
 * Check hook of idempotency.worker_databases: a list of names, not too long.
 */
static bool
CheckWorkerDatabases(char **newval, void **extra, GucSource source)
{
	char	   *raw = pstrdup(*newval);
	List	   *names;
	bool		ok = true;

	if (!SplitIdentifierString(raw, ',', &names))
	{
		GUC_check_errdetail("List syntax is invalid.");
		ok = false;
	}
	else if (list_length(names) > MAX_WORKER_DATABASES)
	{
		GUC_check_errdetail("At most %d databases can be listed.",
							MAX_WORKER_DATABASES);
		ok = false;
	}
	list_free(names);
	pfree(raw);
	return ok;
}

/*
 * A background worker of this library that connects to a database once
 * recovery has finished: its entry point, type and restart time.
 */
static void
WorkerOf(BackgroundWorker *worker, const char *function, const char *type,
		 int restart_time)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = restart_time;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "idempotency");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker->bgw_type, BGW_MAXLEN, "%s", type);
}

/*
 * Define the worker's settings and, when preloading, register the launcher.
 */
void
IdemWorkerInit(void)
{
	BackgroundWorker worker;

	DefineCustomStringVariable("idempotency.worker_databases",
							   "Databases the background worker expires keys in.",
							   "A comma-separated list of database names, quoted like identifiers. Databases that are missing, do not accept connections or lack the extension are skipped quietly.",
							   &idem_worker_databases,
							   "postgres",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   CheckWorkerDatabases, NULL, NULL);

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

	DefineCustomIntVariable("idempotency.worker_batch_delay",
							"Pause of the background worker between two expiry batches of one pass.",
							"Leaves CPU and I/O to claims while a pass works through a backlog of due rows; 0 runs the batches back to back.",
							&idem_worker_batch_delay,
							20, 0, 10000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
		return;

	WorkerOf(&worker, "idem_launcher_main", "idempotency launcher", WORKER_RESTART_SECONDS);
	snprintf(worker.bgw_name, BGW_MAXLEN, "idempotency launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * The OID of a database a pass may connect to, or InvalidOid.  Called in a
 * transaction.  A sequential scan of pg_database: the launcher is connected
 * to no database and may run before the shared relcache init file exists,
 * so it must not depend on pg_database's indexes.
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
			if (db->datallowconn &&
				db->datconnlimit != WORKER_INVALID_DB_CONNLIMIT)
				dboid = db->oid;
			break;
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return dboid;
}

/*
 * When the next pass may start after failures in a row: 2^failures
 * intervals on, at most WORKER_MAX_BACKOFF_MS.
 */
static TimestampTz
BackoffUntil(TimestampTz now, int failures)
{
	int64		delay = idem_worker_interval;

	for (int i = 0; i < failures && delay < WORKER_MAX_BACKOFF_MS; i++)
		delay *= 2;
	return TimestampTzPlusMilliseconds(now, Min(delay, WORKER_MAX_BACKOFF_MS));
}

/*
 * Notice a pass that has stopped: free its handle and, from the flag it
 * left (or did not), reset or extend the database's back-off.
 */
static void
ReapSlot(int i, TimestampTz now)
{
	PassSlot   *s = &slots[i];
	pid_t		pid;

	if (s->handle == NULL ||
		GetBackgroundWorkerPid(s->handle, &pid) != BGWH_STOPPED)
		return;

	pfree(s->handle);
	s->handle = NULL;
	if (pg_atomic_read_u64(&worker_shared->finished[i]) == s->stamp)
	{
		s->failures = 0;
		s->not_before = 0;
	}
	else
	{
		s->failures++;
		s->not_before = BackoffUntil(now, s->failures);
		ereport(DEBUG1,
				(errmsg("idempotency: expiry pass in database %u failed (%d in a row), next attempt in %ld ms",
						s->dboid, s->failures,
						TimestampDifferenceMilliseconds(now, s->not_before))));
	}
}

/*
 * The slot of a database: its own, or a free one (NULL when none is).
 */
static PassSlot *
SlotFor(Oid dboid)
{
	PassSlot   *free_slot = NULL;

	for (int i = 0; i < MAX_WORKER_DATABASES; i++)
	{
		if (slots[i].dboid == dboid)
			return &slots[i];
		if (!OidIsValid(slots[i].dboid) && free_slot == NULL)
			free_slot = &slots[i];
	}
	if (free_slot != NULL)
	{
		memset(free_slot, 0, sizeof(PassSlot));
		free_slot->dboid = dboid;
	}
	return free_slot;
}

/*
 * Start a pass in database dboid from slot s.
 */
static void
StartPass(PassSlot *s, const char *name, TimestampTz now)
{
	BackgroundWorker worker;
	PassArgs	args;
	MemoryContext old;
	BackgroundWorkerHandle *handle;

	StaticAssertStmt(sizeof(PassArgs) <= BGW_EXTRALEN, "PassArgs too large");
	memset(&args, 0, sizeof(args));
	args.slot = (int) (s - slots);
	args.stamp = (uint64) now;
	strlcpy(args.dbname, name, NAMEDATALEN);

	WorkerOf(&worker, "idem_worker_main", "idempotency worker", BGW_NEVER_RESTART);
	snprintf(worker.bgw_name, BGW_MAXLEN, "idempotency worker for database %s", name);
	worker.bgw_main_arg = ObjectIdGetDatum(s->dboid);
	memcpy(worker.bgw_extra, &args, sizeof(args));
	worker.bgw_notify_pid = MyProcPid;

	old = MemoryContextSwitchTo(TopMemoryContext);
	if (RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		s->handle = handle;
		s->stamp = args.stamp;
		start_failed_logged = false;
	}
	else if (!start_failed_logged)
	{
		/* all slots taken: say so once, and try again each interval */
		ereport(LOG,
				(errmsg("idempotency: could not start an expiry worker for database \"%s\"", name),
				 errdetail("All background worker slots are in use."),
				 errhint("Raise max_worker_processes.")));
		start_failed_logged = true;
	}
	MemoryContextSwitchTo(old);
}

/*
 * Start a pass in every configured database that has none running and is
 * not backing off; forget databases no longer configured.
 */
static void
LaunchPasses(TimestampTz now)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	   *names;
	List	   *list;
	ListCell   *lc;

	for (int i = 0; i < MAX_WORKER_DATABASES; i++)
	{
		ReapSlot(i, now);
		slots[i].listed = false;
	}

	names = pstrdup(idem_worker_databases ? idem_worker_databases : "");
	if (!SplitIdentifierString(names, ',', &list))
		list = NIL;				/* cannot happen: the check hook saw it */

	foreach(lc, list)
	{
		const char *name = (const char *) lfirst(lc);
		PassSlot   *s;
		Oid			dboid;

		CHECK_FOR_INTERRUPTS();
		StartTransactionCommand();
		dboid = ConnectableDatabase(name);
		CommitTransactionCommand();
		MemoryContextSwitchTo(cxt);
		if (!OidIsValid(dboid))
		{
			ereport(DEBUG1,
					(errmsg("idempotency: database \"%s\" does not exist or does not accept connections", name)));
			continue;
		}

		s = SlotFor(dboid);
		if (s == NULL)
			continue;			/* a removed database's pass still runs */
		s->listed = true;
		if (s->handle != NULL || now < s->not_before)
			continue;			/* still running, or backing off */
		StartPass(s, name, now);
	}

	for (int i = 0; i < MAX_WORKER_DATABASES; i++)
	{
		if (!slots[i].listed && slots[i].handle == NULL)
			slots[i].dboid = InvalidOid;
	}
}

/*
 * The launcher: start passes every interval until told to stop.
 */
void
idem_launcher_main(Datum main_arg)
{
	MemoryContext loop_cxt;
	TimestampTz last_launch = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("idempotency launcher");
	ereport(LOG, (errmsg("idempotency launcher started")));

	loop_cxt = AllocSetContextCreate(TopMemoryContext,
									 "idempotency launcher",
									 ALLOCSET_DEFAULT_SIZES);

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
		 * The latch is also set when a pass starts or stops (bgw_notify_pid)
		 * and on SIGHUP: start passes only once an interval has gone by.
		 */
		now = GetCurrentTimestamp();
		if (TimestampDifferenceExceeds(last_launch, now, idem_worker_interval))
		{
			MemoryContextSwitchTo(loop_cxt);
			LaunchPasses(now);
			MemoryContextSwitchTo(TopMemoryContext);
			MemoryContextReset(loop_cxt);
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
 * not installed (or its CREATE EXTENSION has not committed).  Called
 * inside SPI.
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
 * Tell the launcher this pass finished.  The stamp only ever grows, so a
 * pass left over from an earlier launcher cannot overwrite a newer one.
 */
static void
ReportPassFinished(void)
{
	pg_atomic_uint64 *finished = &worker_shared->finished[pass_args.slot];
	uint64		seen = pg_atomic_read_u64(finished);

	while (seen < pass_args.stamp &&
		   !pg_atomic_compare_exchange_u64(finished, &seen, pass_args.stamp))
		;
}

/*
 * The role expiry runs as: idempotency_admin.  If it is missing (renamed or
 * dropped) or has been made a superuser, the pass fails rather than run the
 * batches, and any trigger or policy function they fire, with a
 * superuser's rights: the error is logged, counted in worker_errors, and
 * the launcher backs off as after any failed pass.
 */
static Oid
ExpiryRole(void)
{
	Oid			admin = get_role_oid("idempotency_admin", true);

	if (!OidIsValid(admin))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"idempotency_admin\" does not exist"),
				 errdetail("Expiry runs as idempotency_admin, never as the superuser the worker connects as."),
				 errhint("Rename the role back, or create it again with the privileges the extension grants it.")));
	if (superuser_arg(admin))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"idempotency_admin\" must not be a superuser"),
				 errdetail("Expiry runs with idempotency_admin's rights, which must be only the table privileges it needs."),
				 errhint("ALTER ROLE idempotency_admin NOSUPERUSER.")));
	return admin;
}

/* Error context: which database an expiry error came from */
static void
ExpireErrorContext(void *arg)
{
	errcontext("idempotency expiry batch in database \"%s\"",
			   pass_args.dbname);
}

/*
 * One batch in its own transaction; returns the rows it changed, or -1
 * when the extension is not installed here.
 */
static int
ExpireBatch(int batch_size)
{
	IdemExpireResult done = {0, 0, 0};
	ErrorContextCallback errcallback;
	Oid			nspid;
	int			pin;
	int			changed = -1;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "idempotency expiry batch");

	errcallback.callback = ExpireErrorContext;
	errcallback.arg = NULL;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	/*
	 * lock_timeout bounds a wait for the table lock (behind LOCK TABLE or
	 * ALTER TABLE); row locks are never waited for (SKIP LOCKED).  Nothing
	 * arms statement_timeout outside a client's command loop, so its timer
	 * is armed here.
	 */
	(void) set_config_option("lock_timeout", WORKER_LOCK_TIMEOUT, PGC_SUSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	enable_timeout_after(STATEMENT_TIMEOUT, WORKER_STATEMENT_TIMEOUT_MS);

	/* search_path as the functions set it for their own statements */
	pin = IdemPinSearchPath();
	nspid = ExtensionSchema();
	if (OidIsValid(nspid))
	{
		Oid			admin;
		Oid			save_userid;
		int			save_sec;

		/*
		 * This database's counters, found now rather than when a failure
		 * is counted; a database without the extension takes no slot.
		 */
		IdemStatsPrepare();
		admin = ExpiryRole();

		/*
		 * The work runs with idempotency_admin's privileges only, in a
		 * security-restricted operation.  An error unwinds this with the
		 * transaction.
		 */
		GetUserIdAndSecContext(&save_userid, &save_sec);
		SetUserIdAndSecContext(admin, save_sec |
							   SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		changed = IdemExpireBatch(nspid, GetCurrentTimestamp(), batch_size, true, &done);
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	IdemUnpinSearchPath(pin);

	disable_timeout(STATEMENT_TIMEOUT, false);
	error_context_stack = errcallback.previous;

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);

	if (changed > 0)
		ereport(DEBUG1,
				(errmsg("idempotency: expiry batch made %lld stale claims takeover-ready and deleted %lld rows",
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
	volatile bool installed = true;

	memcpy(&pass_args, MyBgworkerEntry->bgw_extra, sizeof(PassArgs));
	if (pass_args.slot < 0 || pass_args.slot >= MAX_WORKER_DATABASES)
		elog(FATAL, "idempotency worker started with invalid slot %d",
			 pass_args.slot);

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
				installed = false;
				break;
			}
			if (changed < batch)
				break;			/* nothing more is due */

			/* a backlog: pause, so that claims keep their share */
			if (idem_worker_batch_delay > 0)
			{
				(void) WaitLatch(MyLatch,
								 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 idem_worker_batch_delay, PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
			}
		}
	}
	PG_CATCH();
	{
		/*
		 * Counted here, then logged once as this process exits; the
		 * launcher sees no success flag and backs off.
		 */
		IdemStatsAdd(IDEM_STAT_WORKER_ERRORS, 1);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (installed)
		IdemStatsWorkerPass(GetCurrentTimestamp());
	else
		ereport(DEBUG1,
				(errmsg("idempotency: extension not installed in this database, nothing to expire")));

	ReportPassFinished();
	proc_exit(0);
}
