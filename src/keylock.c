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

#include "compat.h"
#include "store.h"
#include "claim.h"
#include "hash.h"
#include "keylock.h"
#include "citus/citus.h"

/* Key locks a transaction holds at most (see the top of the file) */
#define KEY_LOCKS_MAX 64

/* Fourth locktag field of key locks on a plain server (SQL uses 1 and 2) */
#define KEY_LOCKTAG_KIND 0x1de5

/*
 * Key locks held by the current transaction, and how many it held when each
 * of its open subtransactions started (a subtransaction that rolls back
 * releases the locks it took, so the count goes back with it).
 */
static LocalTransactionId key_locks_lxid = InvalidLocalTransactionId;
static int	key_locks = 0;
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

/*
 * Subtransaction callback: remember key_locks when a subtransaction starts,
 * forget it when it commits, go back to it when it rolls back.  A
 * subtransaction that started before this library was loaded took no key
 * lock before it: rolled back, it leaves none.
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
LockKeyHere(IdemStmt stmt, text *scope, text *key)
{
	LOCKTAG		tag;
	LockAcquireResult res;
	int64		id = IdemKeyLockId(scope, key);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) ((uint64) id >> 32),
						 (uint32) id, KEY_LOCKTAG_KIND);
	res = LockAcquire(&tag, ExclusiveLock, false, stmt != IDEM_STMT_LOCK_KEY);
	if (res == LOCKACQUIRE_NOT_AVAIL)
		return false;
	if (stmt == IDEM_STMT_PROBE_LOCK_KEY)
		LockRelease(&tag, ExclusiveLock, false);
	return true;
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
	PG_RETURN_BOOL(LockKeyHere(mode == 0 ? IDEM_STMT_LOCK_KEY :
							   mode == 1 ? IDEM_STMT_TRY_LOCK_KEY : IDEM_STMT_PROBE_LOCK_KEY,
							   PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1)));
}

/*
 * Take the key's lock before writing its row (claim.c says when).
 * On Citus, between the library's update and ALTER EXTENSION idempotency
 * UPDATE (a schema without idem_key_lock()), a claim of a key whose shard
 * is elsewhere takes no key lock: the primary key still lets one claim of
 * the key commit, and wait => false may wait for a writer of the key.
 * With wait, waits for a transaction that holds it; without, returns false
 * at once when another transaction holds it.  Past KEY_LOCKS_MAX
 * locks in this transaction none is taken: with wait, nothing is done;
 * without, the lock is only tested.
 */
bool
IdemLockKey(IdemClaimArgs *a, bool wait)
{
	IdemStmt	stmt;
	bool		got;

	KeyLocksSync();
	if (key_locks < KEY_LOCKS_MAX)
		stmt = wait ? IDEM_STMT_LOCK_KEY : IDEM_STMT_TRY_LOCK_KEY;
	else if (wait)
		return true;
	else
		stmt = IDEM_STMT_PROBE_LOCK_KEY;

	if (!IdemCitusPresent() || IdemKeyShardIsLocal(a->nspid, a->scope))
		got = LockKeyHere(stmt, a->scope, a->key);
	else if (IdemKeyLockFunctionExists(a->nspid))
		got = LockKeyRouted(a, stmt);
	else
		return true;			/* a schema before 0.4.0 on Citus: see below */
	if (got && stmt != IDEM_STMT_PROBE_LOCK_KEY)
		key_locks++;
	return got;
}

/* How many key locks this transaction holds */
int
IdemKeyLocksHeld(void)
{
	KeyLocksSync();
	return key_locks;
}
