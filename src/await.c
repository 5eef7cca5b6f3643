/*-------------------------------------------------------------------------
 *
 * await.c
 *	  await_result: a claim that finds the key in flight (processing, its
 *	  lease alive, claimed and committed by another transaction) waits, up
 *	  to a given time, for that claim to finish, and then answers as a
 *	  duplicate of the finished request would (replay, or a takeover of a
 *	  retryable failure); in_progress when the time runs out.
 *
 * The wait comes before the claim proper (IdemClaim), and takes nothing
 * the holder or the worker could wait for: no key lock (a transaction-level
 * lock could not be let go after the wait), no row lock.  Nor does it wait
 * in a transaction that already holds a key lock or has written (has a
 * transaction id: its rows and row locks), nor in a backend that holds an
 * advisory lock of SQL's (of the session or the transaction) or a table
 * locked in a mode stronger than ROW EXCLUSIVE (HoldsLockOthersMayWaitFor;
 * the weaker modes of plain statements are left out, so a holder that
 * locks such a table in SHARE mode before it completes still waits until
 * the deadline): the holder might be waiting for that
 * transaction, and the waiter sleeps on a condition variable, not a
 * lock, so the deadlock detector would not see the cycle.  The waiter reads
 * the key's row with a plain SELECT, which in READ COMMITTED takes a new
 * snapshot each time; it sleeps between reads and stops when the row is no
 * longer in flight (finished, released, taken over, gone), when the lease
 * runs out (the claim after the wait takes the key over), or at its
 * deadline.  Then the claim runs as ever, and every time it writes is
 * taken after the wait.  Under REPEATABLE READ and SERIALIZABLE the
 * transaction's snapshot could never see the holder finish: the claim does
 * not wait there.  Nor does it wait for a claim its own transaction made.
 *
 * Waking: with the library preloaded, shared memory has AWAIT_SLOTS condition
 * variables, each with a count of its waiters; a key uses the slot its hash of
 * (database, scope, key) picks.  A holder's complete, fail, release or resolve
 * notes the key's slot, and at commit (an XactCallback, when the change is
 * visible) broadcasts on it only if the slot has waiters: one atomic read per
 * key the transaction finished, so that a holder pays nothing measurable when
 * nobody waits.  The waiter counts itself in before it reads the row, and
 * sleeps at most IDEM_AWAIT_POLL_MS between reads whether woken or not: so it
 * also finds a result without shared memory, one a holder on another node of a
 * distributed table wrote, one a prepared transaction committed, and a slot
 * shared with another key costs it no more than a read.  The sleep answers
 * interrupts, so statement_timeout and pg_cancel_backend() end it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "common.h"
#include "settings.h"
#include "store.h"
#include "input.h"
#include "claimed.h"
#include "hash.h"
#include "await.h"
#include "keylock.h"

/* Wake-up slots in shared memory; keys share them by hash */
#define AWAIT_SLOTS 1024

/* Keys a transaction notes by slot; past this many it wakes every waiter */
#define AWAIT_MAX_NOTED 64

typedef struct AwaitSlot
{
	ConditionVariable cv;
	pg_atomic_uint32 waiters;
} AwaitSlot;

static AwaitSlot *await_slots = NULL;

/* Slots this transaction finished a key of, to wake at commit */
static int	noted[AWAIT_MAX_NOTED];
static int	n_noted = 0;
static bool noted_overflow = false;
static bool xact_callback_registered = false;

/* The slot this backend waits on now (for an exit in the middle), or NULL */
static AwaitSlot *waiting_on = NULL;
static bool exit_callback_registered = false;

/* The slots' shared memory (shmem.c asks for it) */
Size
IdemAwaitShmemSize(void)
{
	return MAXALIGN(mul_size(AWAIT_SLOTS, sizeof(AwaitSlot)));
}

/*
 * Attach to the slots, making them at postmaster start; shmem.c calls it
 * holding AddinShmemInitLock.
 */
void
IdemAwaitShmemAttach(void)
{
	bool		found;

	await_slots = ShmemInitStruct("idempotency await",
								  mul_size(AWAIT_SLOTS, sizeof(AwaitSlot)), &found);
	if (!found)
	{
		for (int i = 0; i < AWAIT_SLOTS; i++)
		{
			ConditionVariableInit(&await_slots[i].cv);
			pg_atomic_init_u32(&await_slots[i].waiters, 0);
		}
	}
}

/* The slot of (this database, scope, key) */
static int
SlotOf(text *scope, text *key)
{
	uint32		h = hash_bytes((const unsigned char *) VARDATA_ANY(key),
							   VARSIZE_ANY_EXHDR(key));

	h = hash_combine(h, hash_bytes((const unsigned char *) VARDATA_ANY(scope),
								   VARSIZE_ANY_EXHDR(scope)));
	h = hash_combine(h, (uint32) MyDatabaseId);
	return (int) (h % AWAIT_SLOTS);
}

/*
 * An await_result argument, checked: NULL (do not wait) for zero, else
 * itself.  Negative or longer than IDEM_MAX_AWAIT_MS is 22023.  Months
 * count as 30 days and days as 24 hours, as interval comparison counts
 * them (a month is too long either way).
 */
Interval *
IdemAwaitArg(Interval *iv, text *key, text *scope)
{
	double		usecs = (double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY +
		(double) iv->day * USECS_PER_DAY + (double) iv->time;

	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("await_result must not be negative"),
				 IdemErrdetailKey(key, scope),
				 errhint("Pass how long to wait for a claim in flight of the key, such as '2 s'; 0 or NULL does not wait.")));
	if (usecs > (double) IDEM_MAX_AWAIT_MS * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("await_result is too long"),
				 IdemErrdetailKey(key, scope),
				 errhint("The longest is 1 hour.")));
	return usecs == 0 ? NULL : iv;
}

/* idempotency.await_result as an interval, or NULL when it is 0 */
Interval *
IdemAwaitDefault(void)
{
	Interval   *iv;

	if (idem_await_result_ms <= 0)
		return NULL;
	iv = palloc0(sizeof(Interval));
	iv->time = (TimeOffset) idem_await_result_ms * 1000;
	return iv;
}

/*
 * Is the row in flight at now: what a claim would answer in_progress to,
 * and what could still change into a result?
 */
static bool
InFlight(const IdemRow *row, bytea *hash, TimestampTz now)
{
	return row->found && row->status_code == IDEM_PROCESSING &&
		!row->locked_until_null && row->locked_until > now &&
		row->expires_at > now && IdemSameRequest(row->request_hash, hash);
}

/*
 * Does this backend hold a heavyweight lock that another transaction could
 * be waiting for, or come to wait for, with nothing to tell the deadlock
 * detector that it waits in turn for this one: an advisory lock of SQL's
 * (pg_advisory_lock(), pg_advisory_xact_lock(): fourth locktag field 1 or
 * 2), or a relation locked in a mode stronger than those plain statements
 * take (ACCESS SHARE, ROW SHARE, ROW EXCLUSIVE: only DDL and explicit LOCK
 * TABLE conflict with them).  Other advisory classes are an extension's
 * own (the shard metadata locks every call routed to a shard holds,
 * this one's key locks are refused before), and the other lock types are
 * either a transaction's (refused before: it has an xid) or let go at the
 * statement's end.  Reads this backend's own lists of the shared lock
 * table, one partition at a time under its lock; the relation locks of
 * the weak modes are mostly in the backend's fast-path slots, off these
 * lists, and are not wanted.
 * Called only when a wait is about to start.
 */
static bool
HoldsLockOthersMayWaitFor(void)
{
	const LOCKMASK weak = LOCKBIT_ON(AccessShareLock) | LOCKBIT_ON(RowShareLock) |
		LOCKBIT_ON(RowExclusiveLock);
	bool		holds = false;

	for (int i = 0; i < NUM_LOCK_PARTITIONS && !holds; i++)
	{
		LWLock	   *partition = LockHashPartitionLockByIndex(i);
		PROCLOCK   *pl;

		LWLockAcquire(partition, LW_SHARED);
		for (pl = IdemProcLockFirst(MyProc, i); pl != NULL && !holds;
			 pl = IdemProcLockNext(MyProc, i, pl))
		{
			const LOCKTAG *tag = &pl->tag.myLock->tag;

			if (pl->holdMask == 0)
				continue;
			if (tag->locktag_type == LOCKTAG_ADVISORY)
				holds = tag->locktag_field4 == 1 || tag->locktag_field4 == 2;
			else if (tag->locktag_type == LOCKTAG_RELATION)
				holds = (pl->holdMask & ~weak) != 0;
		}
		LWLockRelease(partition);
	}
	return holds;
}

/* Stop counting this backend among its slot's waiters */
static void
LeaveSlot(void)
{
	if (waiting_on != NULL)
	{
		pg_atomic_fetch_sub_u32(&waiting_on->waiters, 1);
		waiting_on = NULL;
	}
}

/* A backend that exits (FATAL) in the middle of a wait leaves its slot */
static void
AwaitAtExit(int code, Datum arg)
{
	LeaveSlot();
}

/*
 * Before the claim proper (IdemClaim, inside SPI): if a->await_result is
 * set, wait as the top of the file says, then clear it (a call waits once).
 * Returns whether it slept at all.
 */
bool
IdemAwaitInFlight(IdemClaimArgs *a)
{
	Interval   *await = a->await_result;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt;
	TimestampTz deadline;
	AwaitSlot  *volatile slot = NULL;	/* volatile: set before PG_TRY, read in it */
	volatile bool slept = false;
	int64		own_token;

	a->await_result = NULL;
	if (await == NULL || IsolationUsesXactSnapshot() ||
		IdemRecallClaim(a->scope, a->key, &own_token) ||
		IdemKeyLocksHeld() > 0 || GetTopTransactionIdIfAny() != InvalidTransactionId)
		return false;

	deadline = IdemTimePlus(GetCurrentTimestamp(), await);
	cxt = AllocSetContextCreate(caller, "idempotency await",
								ALLOCSET_SMALL_SIZES);
	if (await_slots != NULL)
	{
		if (!exit_callback_registered)
		{
			before_shmem_exit(AwaitAtExit, (Datum) 0);
			exit_callback_registered = true;
		}
		slot = &await_slots[SlotOf(a->scope, a->key)];
		/* counted in before the first read: a commit after it wakes us */
		pg_atomic_fetch_add_u32(&slot->waiters, 1);
		waiting_on = slot;
		ConditionVariablePrepareToSleep(&slot->cv);
	}

	PG_TRY();
	{
		for (;;)
		{
			IdemArgs	args = IdemKeyArgs(a->scope, a->key);
			IdemRow		row;
			TimestampTz now;
			TimestampTz until;
			long		timeout;

			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(cxt);
			MemoryContextSwitchTo(cxt);
			now = GetCurrentTimestamp();
			IdemExecute(IDEM_STMT_SELECT, a->nspid, &args, false, 1);
			IdemReadRow(&row, cxt);
			SPI_freetuptable(SPI_tuptable);
			MemoryContextSwitchTo(caller);
			if (!InFlight(&row, a->hash, now) || now >= deadline)
				break;
			/* about to wait: not while holding what the holder may wait for */
			if (!slept && HoldsLockOthersMayWaitFor())
				break;

			/* until the next read: the poll, the lease's end, the deadline */
			until = Min(deadline, row.locked_until);
			until = Min(until, row.expires_at);
			timeout = (long) Min((until - now + 999) / 1000, (int64) IDEM_AWAIT_POLL_MS);
			timeout = Max(timeout, 1);
			slept = true;
			if (slot != NULL)
				(void) ConditionVariableTimedSleep(&slot->cv, timeout, PG_WAIT_EXTENSION);
			else
			{
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 timeout, PG_WAIT_EXTENSION);
				ResetLatch(MyLatch);
			}
		}
	}
	PG_FINALLY();
	{
		MemoryContextSwitchTo(caller);
		if (slot != NULL)
			ConditionVariableCancelSleep();
		LeaveSlot();
	}
	PG_END_TRY();
	MemoryContextDelete(cxt);
	return slept;
}

/* At commit, wake the waiters of the slots noted; forget them at any end */
static void
AwaitXactCallback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			for (int i = 0; noted_overflow && i < AWAIT_SLOTS; i++)
				if (pg_atomic_read_u32(&await_slots[i].waiters) > 0)
					ConditionVariableBroadcast(&await_slots[i].cv);
			for (int i = 0; !noted_overflow && i < n_noted; i++)
				if (pg_atomic_read_u32(&await_slots[noted[i]].waiters) > 0)
					ConditionVariableBroadcast(&await_slots[noted[i]].cv);
			n_noted = 0;
			noted_overflow = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* prepared: the waiters find its COMMIT PREPARED by reading */
			n_noted = 0;
			noted_overflow = false;
			break;
		default:
			break;
	}
}

/*
 * A holder's call finished (scope, key) in this transaction: its waiters
 * are to be woken when the transaction commits.  Without shared memory
 * there is nobody to wake (waiters read the row every IDEM_AWAIT_POLL_MS).
 */
void
IdemAwaitNotify(text *scope, text *key)
{
	int			s;

	if (await_slots == NULL)
		return;
	if (!xact_callback_registered)
	{
		RegisterXactCallback(AwaitXactCallback, NULL);
		xact_callback_registered = true;
	}
	if (noted_overflow)
		return;
	s = SlotOf(scope, key);
	for (int i = 0; i < n_noted; i++)
		if (noted[i] == s)
			return;
	if (n_noted < AWAIT_MAX_NOTED)
		noted[n_noted++] = s;
	else
		noted_overflow = true;
}
