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

	if (txn_claims_lxid != IdemCurrentLxid() || txn_claims == NULL)
	{
		HASHCTL		ctl = {0};

		/* the table of an earlier transaction went with its memory */
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
