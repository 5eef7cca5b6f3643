/*-------------------------------------------------------------------------
 *
 * stamp.c
 *	  The times a call writes (lease ends, expires_at, created_at), counted
 *	  from after the last wait of the whole call.
 *
 * A function that writes a key row's lease or expiry computes them from a
 * time taken just before the write.  Anything the call waits for after
 * that time (a row lock, another transaction's insert of the key, the lock
 * of a later key of a batch, a later key's row in idem_record_batch) would
 * leave the lease or expiry short by the wait: a claim could come back
 * "new" with a lease already run out, and a second holder take the key
 * over.  Rather than check each write, a call keeps one IdemStamp:
 *
 *	- IdemStampArgs gives every write its time (:now, and the caller derives
 *	  the lease end and expiry from it); store.c refuses to run a statement
 *	  that writes a lease or an expiry with a :now that did not come from a
 *	  stamp, and notes the row(s) it wrote (key and token) in that stamp;
 *	- IdemStampEnd, the call's last statement on the table, asks whether the
 *	  call waited since the first of those rows was stamped, and if it did,
 *	  moves every one of them forward to count from now, in one UPDATE
 *	  (IDEM_STMT_RESTAMP: each row by its own stamp, its updated_at).
 *
 * A wait is time the backend spent asleep, off the CPU: the wall-clock time
 * since the stamp less the time the process was on the CPU or runnable
 * (Linux's /proc/self/schedstat) over the same span, counted when it
 * exceeds IDEM_STAMP_SLACK_USECS.  Where schedstat cannot be read, less
 * its CPU time (getrusage: user + system), counted when it exceeds the
 * slack and the backend went to sleep at least once meanwhile (a voluntary
 * context switch: a lock wait, a row lock, I/O all sleep).  Work on the CPU, such
 * as a batch's INSERT of a thousand rows, is not a wait however long it
 * takes, so a call that did not wait writes each row once.  Nor is being
 * preempted on a busy machine (an involuntary switch, CPU time missed
 * while runnable): like the work itself it lasts in proportion to the
 * work, and counting it would restamp every large batch on a loaded
 * machine, the double write this module removes.  (A platform whose
 * getrusage counts no context switches counts every span off the CPU.)
 *
 * A write to the only key the call has written so far (idem_execute's
 * complete after its claim) counts everything from its own time, so the
 * call's span starts again there: the caller's statement between the two
 * is not a wait of the row's times.  getrusage is a system call: a call
 * takes it when it stamps its first row and, only if the call then lasted
 * longer than the slack, once more at the end.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common.h"
#include "store.h"
#include "input.h"

/*
 * Where Linux tells it (/proc/self/schedstat, kept open: one pread per
 * reading), the time this process was on the CPU or runnable, waiting in
 * its run queue for one: what is left of the wall-clock time is time
 * asleep, which is all a wait is.  -1: not to be had here.
 */
static int	schedstat_fd = -1;
static int	schedstat_pid = 0;
static bool schedstat_missing = false;

static int64
BusyUsecs(void)
{
	char		buf[128];
	ssize_t		n;
	unsigned long long on_cpu;
	unsigned long long runnable;

	if (schedstat_missing)
		return -1;
	if (schedstat_fd < 0 || schedstat_pid != MyProcPid)
	{
		/* opened in this process: /proc/self is the process that opens it */
		if (schedstat_fd >= 0)
			close(schedstat_fd);
		schedstat_fd = BasicOpenFile("/proc/self/schedstat", O_RDONLY | PG_BINARY);
		schedstat_pid = MyProcPid;
		if (schedstat_fd < 0)
		{
			schedstat_missing = true;
			return -1;
		}
	}
	n = pread(schedstat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
	{
		schedstat_missing = true;
		return -1;
	}
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &on_cpu, &runnable) != 2)
	{
		schedstat_missing = true;
		return -1;
	}
	return (int64) ((on_cpu + runnable) / 1000);
}

/*
 * This process's time not asleep, in microseconds: on the CPU or waiting
 * for it (BusyUsecs), *counted false; elsewhere its CPU time (getrusage:
 * user + system) and its sleeps (voluntary context switches), *counted
 * telling whether getrusage counts them.
 */
static void
ProcessClock(int64 *cpu_usecs, long *sleeps, bool *counted)
{
	struct rusage ru;
	int64		busy = BusyUsecs();

	if (busy >= 0)
	{
		*cpu_usecs = busy;
		*sleeps = 0;
		*counted = false;
		return;
	}
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		elog(ERROR, "getrusage failed: %m");
	*cpu_usecs = (int64) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * USECS_PER_SEC +
		ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
	*sleeps = ru.ru_nvcsw;
	*counted = ru.ru_nvcsw != 0 || ru.ru_nivcsw != 0;
}

/* A stamp for a call, whose rows' lists grow in the current memory context */
void
IdemStampInit(IdemStamp *s)
{
	memset(s, 0, sizeof(IdemStamp));
	s->mcxt = CurrentMemoryContext;
	s->keys = s->inline_keys;
	s->tokens = s->inline_tokens;
	s->maxrows = lengthof(s->inline_keys);
}

/*
 * The time for a write of statement stmt with args, taken now (after its
 * plan is made): set as its :now (and :now_epoch); the caller derives the
 * lease end and expiry it writes from the value returned.  The write must
 * be the next statement that stamp runs.
 */
TimestampTz
IdemStampArgs(IdemStamp *s, IdemStmt stmt, Oid nspid, IdemArgs *args)
{
	text	   *key = NULL;
	TimestampTz now;

	IdemPrepare(stmt, nspid);
	if ((args->given & (UINT32_C(1) << IDEM_PARAM_KEY)) != 0)
		key = DatumGetTextPP(args->value[IDEM_PARAM_KEY]);
	/* a write that supersedes every row still pending starts the span again */
	s->restart = s->nrows > 0 && key != NULL && s->only_key != NULL &&
		IdemCompareKeys(key, s->only_key) == 0;
	if (s->nrows == 0 || s->restart)
		ProcessClock(&s->next_cpu, &s->next_sleeps, &s->counted);
	now = GetCurrentTimestamp();
	if (s->nrows == 0 || s->restart)
		s->next_since = now;
	s->now = now;
	args->stamp = s;
	IdemArg(args, IDEM_PARAM_NOW, TimestampTzGetDatum(now));
	IdemArg(args, IDEM_PARAM_NOW_EPOCH, Float8GetDatum(IdemEpochSeconds(now)));
	return now;
}

/*
 * Before statement stmt, which writes a lease or an expiry, runs with args:
 * its times must come from a stamp, the one it is the next write of.
 */
void
IdemStampCheck(IdemStmt stmt, const IdemArgs *args)
{
	if (args->stamp == NULL ||
		(args->given & (UINT32_C(1) << IDEM_PARAM_NOW)) == 0 ||
		DatumGetTimestampTz(args->value[IDEM_PARAM_NOW]) != args->stamp->now)
		elog(ERROR, "statement %d writes times that were not taken from the call's stamp",
			 (int) stmt);
}

/* Note one row written: key, with token */
static void
NoteRow(IdemStamp *s, Datum key, Datum token)
{
	if (s->nrows == s->maxrows)
	{
		int			maxrows = s->maxrows * 4;
		Datum	   *keys = MemoryContextAlloc(s->mcxt, sizeof(Datum) * maxrows);
		Datum	   *tokens = MemoryContextAlloc(s->mcxt, sizeof(Datum) * maxrows);

		memcpy(keys, s->keys, sizeof(Datum) * s->nrows);
		memcpy(tokens, s->tokens, sizeof(Datum) * s->nrows);
		if (s->keys != s->inline_keys)
		{
			pfree(s->keys);
			pfree(s->tokens);
		}
		s->keys = keys;
		s->tokens = tokens;
		s->maxrows = maxrows;
	}
	if (s->nrows == 0)
		s->only_key = DatumGetTextPP(key);
	else if (s->only_key != NULL &&
			 IdemCompareKeys(s->only_key, DatumGetTextPP(key)) != 0)
		s->only_key = NULL;
	s->keys[s->nrows] = key;
	s->tokens[s->nrows] = token;
	s->nrows++;
}

/*
 * Statement stmt, stamped by args->stamp (IdemStampCheck), has run and
 * written processed rows; note them: the batch's :keys with their :tokens
 * (a key left out by ON CONFLICT has no row with its token, and so is not
 * moved), or the row of :key, with :new_token where the statement writes a
 * new one (given by new_token), else :token.  The keys must live until
 * IdemStampEnd.
 */
void
IdemStampWrote(IdemStmt stmt, const IdemArgs *args, bool new_token,
			   uint64 processed)
{
	IdemStamp  *s = args->stamp;
	text	   *scope = DatumGetTextPP(args->value[IDEM_PARAM_SCOPE]);

	if (processed == 0)
		return;
	if (s->nrows == 0 || s->restart)
	{
		s->nrows = 0;
		s->since = s->next_since;
		s->cpu_since = s->next_cpu;
		s->sleeps_since = s->next_sleeps;
		s->restart = false;
	}
	if (s->scope == NULL)
		s->scope = scope;
	else if (IdemCompareKeys(s->scope, scope) != 0)
		elog(ERROR, "a call's stamp covers the rows of one scope");

	if ((args->given & (UINT32_C(1) << IDEM_PARAM_KEYS)) != 0)
	{
		Datum	   *keys;
		Datum	   *tokens;
		int			n;
		int			m;

		deconstruct_array(DatumGetArrayTypeP(args->value[IDEM_PARAM_KEYS]),
						  TEXTOID, -1, false, TYPALIGN_INT, &keys, NULL, &n);
		deconstruct_array(DatumGetArrayTypeP(args->value[IDEM_PARAM_TOKENS]),
						  INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
						  &tokens, NULL, &m);
		if (n != m)
			elog(ERROR, "statement %d was given %d keys and %d tokens", (int) stmt, n, m);
		for (int i = 0; i < n; i++)
			NoteRow(s, keys[i], tokens[i]);
	}
	else
		NoteRow(s, args->value[IDEM_PARAM_KEY],
				args->value[new_token ? IDEM_PARAM_NEW_TOKEN : IDEM_PARAM_TOKEN]);
}

/*
 * Has the call waited since its first pending row was stamped, so that its
 * end must move its rows (IdemStampEnd)?  Asked once, at its end; a caller
 * that must prepare for IdemStampEnd's statement (pin the search_path) asks
 * first, so that a call that did not wait pays nothing for it.
 */
bool
IdemStampWaited(IdemStamp *s)
{
	TimestampTz now;
	int64		cpu;
	long		sleeps;
	bool		counted;

	if (s->nrows == 0)
		return false;
	if (s->waited)
		return true;
	now = GetCurrentTimestamp();
	if (now - s->since <= IDEM_STAMP_SLACK_USECS)
		return false;			/* not even that long, on the CPU or off it */
	ProcessClock(&cpu, &sleeps, &counted);
	if ((now - s->since) - (cpu - s->cpu_since) <= IDEM_STAMP_SLACK_USECS ||
		(counted && sleeps == s->sleeps_since))
		return false;
	s->waited = true;
	return true;
}

/*
 * The end of the call: if it waited since its first pending row was
 * stamped (IdemStampWaited), move every row it wrote forward to count from
 * now, in one statement; returns whether it did (then SPI_tuptable holds
 * their token and locked_until).  This must be the call's last statement on
 * the table; nothing it does can wait (the rows are this transaction's).
 * Must be called inside SPI.
 */
bool
IdemStampEnd(IdemStamp *s, Oid nspid)
{
	IdemArgs	args = {.given = 0};
	MemoryContext old;

	if (!IdemStampWaited(s))
		return false;

	old = MemoryContextSwitchTo(s->mcxt);
	IdemArg(&args, IDEM_PARAM_SCOPE, PointerGetDatum(s->scope));
	IdemArg(&args, IDEM_PARAM_KEYS,
			PointerGetDatum(construct_array(s->keys, s->nrows, TEXTOID, -1, false, TYPALIGN_INT)));
	IdemArg(&args, IDEM_PARAM_TOKENS,
			PointerGetDatum(construct_array(s->tokens, s->nrows, INT8OID, sizeof(int64),
											FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)));
	MemoryContextSwitchTo(old);
	IdemArg(&args, IDEM_PARAM_NOW, TimestampTzGetDatum(GetCurrentTimestamp()));
	/*
	 * None of its rows found: only row level security hides a row this
	 * transaction wrote, when what its policies read (a mapping table)
	 * changed while the call waited
	 */
	if (IdemExecute(IDEM_STMT_RESTAMP, nspid, &args, false, 0) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not move the idempotency key rows forward after a wait"),
				 errdetail("The rows this call wrote are no longer visible to it: what the table's row level security policies read changed meanwhile."),
				 errhint("Retry the transaction.")));
	s->nrows = 0;
	s->waited = false;
	return true;
}
