/*-------------------------------------------------------------------------
 *
 * keylock.c
 *	  Key locks: the transaction-level lock a claim takes on (scope, key)
 *	  before it writes the key's row (claim.c says when and why), on this
 *	  server or, on Citus, on the node that holds the key's shard.
 *
 * A transaction holds at most KEY_LOCKS_MAX of them, so that a batch
 * claiming thousands of keys cannot fill the shared lock table: past them,
 * its claims take none (those that would only try the lock test it:
 * taken and released at once).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "compat.h"
#include "store.h"
#include "claimed.h"
#include "policy.h"
#include "hash.h"
#include "keylock.h"
#include "citus/citus.h"

/* Key locks a transaction holds at most (see the top of the file) */
#define KEY_LOCKS_MAX 64

/* Fourth locktag field of key locks on a plain server (SQL uses 1 and 2) */
#define KEY_LOCKTAG_KIND 0x1de5

/*
 * The key locks the current transaction holds, by lock id, in the order
 * taken, and how many it held when each of its open subtransactions
 * started.  Every key lock is taken and released under the resource owner
 * of the current (sub)transaction, never a portal's (a cursor's FETCH runs
 * under its portal's owner, which outlives a savepoint rolled back around
 * it), so a subtransaction that rolls back releases exactly the locks it
 * took: the ones past its start in key_lock_ids, dropped with them.  So
 * key_lock_ids is always the set of key locks held, whatever runs the
 * claims (cursors, savepoints, functions, procedures that commit), and a
 * lock already held is neither taken nor counted again.
 */
static LocalTransactionId key_locks_lxid = InvalidLocalTransactionId;
static int	key_locks = 0;
static int64 key_lock_ids[KEY_LOCKS_MAX];
static List *key_locks_subids = NIL;	/* open subtransactions, innermost last */
static List *key_locks_saved = NIL;		/* key_locks when each started */

/* Make key_locks the current transaction's */
static void
KeyLocksSync(void)
{
	if (key_locks_lxid != IdemCurrentLxid())
	{
		/* the lists of an earlier transaction went with its memory */
		key_locks_lxid = IdemCurrentLxid();
		key_locks = 0;
		key_locks_subids = NIL;
		key_locks_saved = NIL;
	}
}

/* Where lock id is in key_lock_ids, or -1 */
static int
KeyLockIndex(int64 id)
{
	for (int i = 0; i < key_locks; i++)
		if (key_lock_ids[i] == id)
			return i;
	return -1;
}

/*
 * Subtransaction callback: remember key_locks when a subtransaction starts,
 * forget it when it commits (its locks pass to its parent), go back to it
 * when it rolls back (its locks are released with it).  A subtransaction
 * that started before this library was loaded took no key lock before it:
 * rolled back, it leaves none.
 */
static void
KeyLocksSubXact(SubXactEvent event, SubTransactionId mySubid,
				SubTransactionId parentSubid, void *arg)
{
	bool		mine;
	MemoryContext old;

	KeyLocksSync();
	mine = key_locks_subids != NIL && (SubTransactionId) llast_int(key_locks_subids) == mySubid;
	switch (event)
	{
		case SUBXACT_EVENT_START_SUB:
			old = MemoryContextSwitchTo(TopTransactionContext);
			key_locks_subids = lappend_int(key_locks_subids, (int) mySubid);
			key_locks_saved = lappend_int(key_locks_saved, key_locks);
			MemoryContextSwitchTo(old);
			break;
		case SUBXACT_EVENT_ABORT_SUB:
			key_locks = mine ? llast_int(key_locks_saved) : 0;
			IdemFallthrough;
		case SUBXACT_EVENT_COMMIT_SUB:
			if (mine)
			{
				key_locks_subids = list_delete_last(key_locks_subids);
				key_locks_saved = list_delete_last(key_locks_saved);
			}
			break;
		default:
			break;
	}
}

/* Called from _PG_init */
void
IdemKeyLockInit(void)
{
	RegisterSubXactCallback(KeyLocksSubXact, NULL);
}

/* The key lock's tag on this server */
static void
KeyLockTag(LOCKTAG *tag, int64 id)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) ((uint64) id >> 32),
						 (uint32) id, KEY_LOCKTAG_KIND);
}

/*
 * The key's lock: an advisory lock of this database on the key's lock id,
 * a keyed hash of (scope, key) under a secret of this server
 * (IdemKeyLockId), so that no role can compute another scope's key lock
 * id, or a key of its own that shares one, although pg_locks shows it.
 * Its fourth locktag field is KEY_LOCKTAG_KIND, which no SQL function
 * takes (pg_advisory_lock() and its kin use 1 and 2), so that no role can
 * take or hold another scope's key lock with them; pg_locks shows it as
 * locktype advisory, objsubid KEY_LOCKTAG_KIND.  On Citus it is taken on
 * the node that holds the key's shard, with that node's secret: here when
 * the shard is here, else by idem_key_lock() in a statement Citus routes
 * there (LockKeyRouted), so that every caller of a key meets the same lock.
 */
static bool
LockKeyHere(IdemStmt stmt, int64 id)
{
	LOCKTAG		tag;
	LockAcquireResult res;
	ResourceOwner saved = CurrentResourceOwner;

	KeyLockTag(&tag, id);
	/* the (sub)transaction's owner, not a portal's: see key_lock_ids */
	CurrentResourceOwner = CurTransactionResourceOwner;
	PG_TRY();
	{
		res = LockAcquire(&tag, ExclusiveLock, false, stmt != IDEM_STMT_LOCK_KEY);
		if (res != LOCKACQUIRE_NOT_AVAIL && stmt == IDEM_STMT_PROBE_LOCK_KEY)
			LockRelease(&tag, ExclusiveLock, false);
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved;
	}
	PG_END_TRY();
	return res != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * The same on a Citus node, through the key's row, so that the lock is
 * taken on the node that holds the key's shard, wherever this runs.
 */
static bool
LockKeyRouted(IdemClaimArgs *a, IdemStmt stmt)
{
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);
	bool		isnull;

	IdemExecute(stmt, a->nspid, &args, false, 0);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * idem_key_lock(scope, key, mode): the key's lock, on this node (the
 * statement LockKeyRouted sends runs it on the node that holds the key's
 * shard).  mode 0 waits for it, 1 tries it, 2 tries it and lets it go
 * (is it free?); returns whether it was had.
 */
PG_FUNCTION_INFO_V1(idem_key_lock);
Datum
idem_key_lock(PG_FUNCTION_ARGS)
{
	int32		mode = PG_GETARG_INT32(2);
	int64		id;
	bool		got;

	/*
	 * Only for the statement a claim routes on Citus: on a plain server a
	 * claim takes the lock itself, after which row level security refuses
	 * a scope the caller may not use; callable there, this would let a
	 * tenant test and hold another's key locks.
	 */
	if (!IdemCitusPresent())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("idem_key_lock() is only for claims on Citus"),
				 errdetail("On a server without Citus a claim takes its key's lock itself.")));
	if (mode < 0 || mode > 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid key lock mode %d", mode),
				 errhint("The mode is 0 (wait), 1 (try) or 2 (probe).")));
	id = IdemKeyLockId(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1));
	if (mode == 2)
		PG_RETURN_BOOL(LockKeyHere(IDEM_STMT_PROBE_LOCK_KEY, id));

	/*
	 * Counted with the claims' own, and held at most KEY_LOCKS_MAX a
	 * transaction: a claim routes no more (past them it takes none), so a
	 * call past them is not a claim's, and would fill the shared lock
	 * table.
	 */
	KeyLocksSync();
	if (KeyLockIndex(id) >= 0)
		PG_RETURN_BOOL(true);
	if (key_locks >= KEY_LOCKS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many key locks in this transaction"),
				 errdetail("A transaction holds at most %d key locks; claims past them take none.",
						   KEY_LOCKS_MAX)));
	got = LockKeyHere(mode == 0 ? IDEM_STMT_LOCK_KEY : IDEM_STMT_TRY_LOCK_KEY, id);
	if (got)
		key_lock_ids[key_locks++] = id;
	PG_RETURN_BOOL(got);
}

/*
 * Take the key's lock before writing its row (claim.c says when).
 * On Citus, between the library's update and ALTER EXTENSION idempotency
 * UPDATE (a schema without idem_key_lock()), a claim of a key whose shard
 * is elsewhere takes no key lock: the primary key still lets one claim of
 * the key commit, and wait => false may wait for a writer of the key.
 * With wait, waits for a transaction that holds it; without, returns false
 * at once when another transaction holds it.  A lock this transaction
 * holds already is had at once, and not counted again.  Past
 * KEY_LOCKS_MAX locks in this transaction none is taken: with wait,
 * nothing is done; without, the lock is only tested.
 */
bool
IdemLockKey(IdemClaimArgs *a, bool wait)
{
	IdemStmt	stmt;
	bool		got;
	int64		id;

	KeyLocksSync();
	id = IdemKeyLockId(a->scope, a->key);
	if (KeyLockIndex(id) >= 0)
		return true;
	/* under row level security: 42501 for another's scope, before its lock */
	IdemCheckScopeBeforeLock(a);
	if (key_locks < KEY_LOCKS_MAX)
		stmt = wait ? IDEM_STMT_LOCK_KEY : IDEM_STMT_TRY_LOCK_KEY;
	else if (wait)
		return true;
	else
		stmt = IDEM_STMT_PROBE_LOCK_KEY;

	if (IdemCitusKeyLockHere(IdemKeysRelid(a->nspid), a->scope))
		got = LockKeyHere(stmt, id);
	else if (IdemKeyLockFunctionExists(a->nspid))
		got = LockKeyRouted(a, stmt);
	else
		return true;			/* a schema before 0.4.0 on Citus: see below */
	if (got && stmt != IDEM_STMT_PROBE_LOCK_KEY)
		key_lock_ids[key_locks++] = id;
	return got;
}

/* How many key locks this transaction holds */
int
IdemKeyLocksHeld(void)
{
	KeyLocksSync();
	return key_locks;
}

/*
 * Let go of the key's lock if this transaction took it after mark (a
 * count of IdemKeyLocksHeld), in the (sub)transaction that runs now, on
 * this server: a batch that took the locks of its keys before writing them
 * keeps only those of the keys it wrote, as a single claim that reads a
 * key without writing it takes no lock.  A lock held from before mark
 * stays held.
 */
void
IdemUnlockKeySince(IdemClaimArgs *a, int mark)
{
	LOCKTAG		tag;
	ResourceOwner saved = CurrentResourceOwner;
	int64		id;
	int			i;
	int			level_start;

	KeyLocksSync();
	id = IdemKeyLockId(a->scope, a->key);
	i = KeyLockIndex(id);
	level_start = key_locks_saved != NIL ? llast_int(key_locks_saved) : 0;
	if (i < 0 || i < mark || i < level_start || IdemCitusPresent())
		return;
	KeyLockTag(&tag, id);
	CurrentResourceOwner = CurTransactionResourceOwner;
	PG_TRY();
	{
		LockRelease(&tag, ExclusiveLock, false);
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved;
	}
	PG_END_TRY();
	memmove(&key_lock_ids[i], &key_lock_ids[i + 1], sizeof(int64) * (key_locks - i - 1));
	key_locks--;
}
