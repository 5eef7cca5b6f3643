/*-------------------------------------------------------------------------
 *
 * claimed.c
 *	  The claims this transaction made (IdemRememberClaim, IdemRecallClaim),
 *	  below claim.c and await.c, which both ask it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "compat.h"
#include "claimed.h"
#include "nodes/pg_list.h"

/*
 * Claims this transaction made, what lets a NULL token through: a hash
 * table in the transaction's memory from "scope \x01 key" (neither holds a
 * control character) to the latest token, so that a transaction of many
 * claims (batches of thousands) finds each in constant time.
 */
typedef struct TxnClaimKey
{
	const char *name;
	int			len;
} TxnClaimKey;

typedef struct TxnClaim
{
	TxnClaimKey key;			/* must be first */
	int64		token;
} TxnClaim;

static HTAB *txn_claims = NULL;
static LocalTransactionId txn_claims_lxid = InvalidLocalTransactionId;

/*
 * What a subtransaction that rolls back must undo: each claim remembered
 * inside an open subtransaction is logged with what the table held for its
 * key before (its earlier token, or nothing), and a subtransaction that
 * rolls back puts back, newest first, every entry logged since it started
 * (its own and those of its committed children).  A savepoint that rolled
 * back a claim of a key this transaction had claimed before leaves the
 * earlier claim's token, which is the one the row has again.  A
 * subtransaction that started before this library was loaded (not in
 * undo_subids) logged everything there is: rolled back, it undoes all.
 * All of it lives in TopTransactionContext, reset with txn_claims.
 */
typedef struct ClaimUndo
{
	TxnClaim   *claim;			/* the entry (dynahash entries do not move) */
	bool		had;			/* it held a token before */
	int64		token;			/* that token */
} ClaimUndo;

static ClaimUndo *undo = NULL;
static int	undo_len = 0;
static int	undo_cap = 0;
static List *undo_subids = NIL;	/* open subtransactions, innermost last */
static List *undo_saved = NIL;	/* undo_len when each started */

/* Make the undo log the current transaction's */
static void
ClaimUndoSync(void)
{
	if (txn_claims_lxid != IdemCurrentLxid())
	{
		/* the table and log of an earlier transaction went with its memory */
		txn_claims = NULL;
		txn_claims_lxid = IdemCurrentLxid();
		undo = NULL;
		undo_len = undo_cap = 0;
		undo_subids = NIL;
		undo_saved = NIL;
	}
}

static void
ClaimsSubXact(SubXactEvent event, SubTransactionId mySubid,
			  SubTransactionId parentSubid, void *arg)
{
	bool		mine;
	int			keep;
	MemoryContext old;

	ClaimUndoSync();
	mine = undo_subids != NIL && (SubTransactionId) llast_int(undo_subids) == mySubid;
	switch (event)
	{
		case SUBXACT_EVENT_START_SUB:
			old = MemoryContextSwitchTo(TopTransactionContext);
			undo_subids = lappend_int(undo_subids, (int) mySubid);
			undo_saved = lappend_int(undo_saved, undo_len);
			MemoryContextSwitchTo(old);
			break;
		case SUBXACT_EVENT_ABORT_SUB:
			keep = mine ? llast_int(undo_saved) : 0;
			while (undo_len > keep)
			{
				ClaimUndo  *u = &undo[--undo_len];

				if (u->had)
					u->claim->token = u->token;
				else
					(void) hash_search(txn_claims, &u->claim->key, HASH_REMOVE, NULL);
			}
			IdemFallthrough;
		case SUBXACT_EVENT_COMMIT_SUB:
			if (mine)
			{
				undo_subids = list_delete_last(undo_subids);
				undo_saved = list_delete_last(undo_saved);
			}
			break;
		default:
			break;
	}
}

/* Called from _PG_init */
void
IdemClaimedInit(void)
{
	RegisterSubXactCallback(ClaimsSubXact, NULL);
}

static uint32
TxnClaimHash(const void *key, Size keysize)
{
	const TxnClaimKey *k = (const TxnClaimKey *) key;

	return hash_bytes((const unsigned char *) k->name, k->len);
}

static int
TxnClaimMatch(const void *key1, const void *key2, Size keysize)
{
	const TxnClaimKey *x = (const TxnClaimKey *) key1;
	const TxnClaimKey *y = (const TxnClaimKey *) key2;

	return x->len == y->len ? memcmp(x->name, y->name, x->len) : 1;
}

/* "scope \x01 key", allocated in the current memory context */
static TxnClaimKey
TxnClaimKeyOf(text *scope, text *key)
{
	int			ls = VARSIZE_ANY_EXHDR(scope);
	int			lk = VARSIZE_ANY_EXHDR(key);
	char	   *name = palloc(ls + 1 + lk);

	memcpy(name, VARDATA_ANY(scope), ls);
	name[ls] = '\x01';
	memcpy(name + ls + 1, VARDATA_ANY(key), lk);
	return (TxnClaimKey) {name, ls + 1 + lk};
}

/*
 * Remember that this transaction claimed (scope, key) with token, so that
 * later calls in the same transaction may leave the token out; a key
 * claimed again keeps its latest token.
 */
void
IdemRememberClaim(text *scope, text *key, int64 token)
{
	MemoryContext old;
	TxnClaimKey k;
	TxnClaim   *claim;
	bool		found;

	ClaimUndoSync();
	if (txn_claims == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = sizeof(TxnClaimKey);
		ctl.entrysize = sizeof(TxnClaim);
		ctl.hash = TxnClaimHash;
		ctl.match = TxnClaimMatch;
		ctl.hcxt = TopTransactionContext;
		txn_claims = hash_create("idempotency claims of the transaction", 64, &ctl,
								 HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
		txn_claims_lxid = IdemCurrentLxid();
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	k = TxnClaimKeyOf(scope, key);
	claim = hash_search(txn_claims, &k, HASH_ENTER, &found);
	if (found)
		pfree((void *) k.name);
	/* inside a subtransaction: log what to put back should it roll back */
	if (GetCurrentTransactionNestLevel() > 1)
	{
		if (undo_len == undo_cap)
		{
			undo_cap = Max(16, undo_cap * 2);
			undo = undo == NULL ? palloc(sizeof(ClaimUndo) * undo_cap) :
				repalloc(undo, sizeof(ClaimUndo) * undo_cap);
		}
		undo[undo_len++] = (ClaimUndo) {claim, found, found ? claim->token : 0};
	}
	claim->token = token;
	MemoryContextSwitchTo(old);
}

/*
 * The token of this transaction's latest claim of (scope, key), if any.
 */
bool
IdemRecallClaim(text *scope, text *key, int64 *token)
{
	TxnClaimKey k;
	TxnClaim   *claim;

	if (txn_claims_lxid != IdemCurrentLxid() || txn_claims == NULL)
		return false;
	k = TxnClaimKeyOf(scope, key);
	claim = hash_search(txn_claims, &k, HASH_FIND, NULL);
	pfree((void *) k.name);
	if (claim == NULL)
		return false;
	*token = claim->token;
	return true;
}
