/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  Under row level security, a claim's scope checked against the
 *	  table's policies before any of the key's locks is touched
 *	  (IdemCheckScopeBeforeLock, which IdemLockKey calls).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "common.h"
#include "store.h"
#include "input.h"
#include "claimed.h"
#include "policy.h"
#include "citus/citus.h"

/*
 * Under row level security, the policy is checked before any of a key's
 * locks is touched (IdemLockKey calls IdemCheckScopeBeforeLock): the
 * claim's INSERT, run in a subtransaction that always rolls back, raises
 * 42501 for a scope the caller may not use before it takes or waits for
 * anything of the key (PostgreSQL checks an INSERT's WITH CHECK policies
 * before its ON CONFLICT check).  Had the key's lock come first, even only
 * tried, a tenant would hold another scope's key lock for an instant, so
 * that pg_locks shows it the lock's id (to watch that key's writers with),
 * the holder's wait => false takeovers find it busy, and the refusal comes
 * later while the other scope writes the key.  A scope found allowed is
 * remembered for the user (a few of them, forgotten at any relcache
 * invalidation, as a policy change makes, and when a role is renamed or its
 * memberships change): its later claims check nothing first.  A row
 * deleted from a table the policy reads (the tenant recipe's mapping) makes
 * no invalidation: until one comes, a session that had the scope tries its
 * key's lock before the INSERT refuses it (docs/tenants.md).
 */
#define ERRCODE_IDEM_POLICY_PROBED	MAKE_SQLSTATE('I','K','P','0','1')	/* never raised to a caller */
#define CHECKED_SCOPES 8

typedef struct CheckedScope
{
	Oid			userid;
	Oid			nspid;
	text	   *scope;			/* NULL: unused; in IdemCacheContext() */
} CheckedScope;

static CheckedScope checked_scopes[CHECKED_SCOPES];
static int	checked_next = 0;
static bool checked_callback = false;

static void
CheckedScopesForget(Datum arg, Oid relid)
{
	(void) arg;
	(void) relid;
	for (int i = 0; i < CHECKED_SCOPES; i++)
		if (checked_scopes[i].scope != NULL)
		{
			pfree(checked_scopes[i].scope);
			checked_scopes[i].scope = NULL;
		}
}

/* a role renamed, or its memberships changed: a policy may read either */
static void
CheckedScopesForgetRoles(Datum arg, int cacheid, uint32 hashvalue)
{
	(void) cacheid;
	(void) hashvalue;
	CheckedScopesForget(arg, InvalidOid);
}

static bool
ScopeChecked(IdemClaimArgs *a)
{
	Oid			userid = GetUserId();

	for (int i = 0; i < CHECKED_SCOPES; i++)
		if (checked_scopes[i].scope != NULL && checked_scopes[i].userid == userid &&
			checked_scopes[i].nspid == a->nspid &&
			IdemCompareKeys(checked_scopes[i].scope, a->scope) == 0)
			return true;
	return false;
}

static void
PolicyProbeBody(void *arg)
{
	IdemClaimArgs *a = (IdemClaimArgs *) arg;
	IdemArgs	args = IdemKeyArgs(a->scope, a->key);
	int			pin = IdemConnect();

	IdemArgPtr(&args, IDEM_PARAM_REQUEST_HASH, a->hash);
	IdemArg(&args, IDEM_PARAM_NEW_TOKEN, Int64GetDatum(IdemNextToken(a->nspid)));
	IdemStampWrite(a, IDEM_STMT_INSERT, &args);

	/*
	 * Only the INSERT under lock_timeout: the policy is checked before it
	 * could wait for another writer of the key (in the caller's own scope,
	 * then), which would hold up a wait => false claim
	 */
	(void) set_config_option("lock_timeout", "1", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) IdemExecute(IDEM_STMT_INSERT, a->nspid, &args, false, 0);
	IdemFinish(pin);
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_POLICY_PROBED),
			 errmsg("row level security allows scope \"%s\"", IdemKeyForMessage(a->scope))));
}

void
IdemCheckScopeBeforeLock(IdemClaimArgs *a)
{
	static const int caught[] = {ERRCODE_IDEM_POLICY_PROBED, ERRCODE_LOCK_NOT_AVAILABLE, 0};
	CheckedScope *c;
	IdemStamp	kept;
	TimestampTz kept_now;
	int			probed;

	/*
	 * Not on Citus: with the probe's subtransaction rolled back around a
	 * statement Citus routed, the tenant's next call failed with 08006 and
	 * ended its session with XX000 (test/citus, citus/tenants).  There a
	 * tenant that knows another's exact key can hold its lock anyway
	 * (docs/citus.md, Limitations).
	 */
	if (!IdemRlsApplies(a->nspid) || ScopeChecked(a) || IdemCitusPresent())
		return;
	kept = a->stamp;
	kept_now = a->now;
	probed = IdemRunInSubtransaction(PolicyProbeBody, a, caught, NULL);

	/*
	 * The probe's row rolled back: the call's stamp forgets it (else a
	 * call that wrote nothing else, another claim of the key having come
	 * between, found no row to move forward after a wait).  Its lists may
	 * have grown meanwhile: they stay, with what they held before.
	 */
	kept.keys = a->stamp.keys;
	kept.tokens = a->stamp.tokens;
	kept.maxrows = a->stamp.maxrows;
	a->stamp = kept;
	a->now = kept_now;
	if (probed != ERRCODE_IDEM_POLICY_PROBED)
		return;					/* a lock timeout: allowed, but not remembered */
	if (!checked_callback)
	{
		CacheRegisterRelcacheCallback(CheckedScopesForget, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, CheckedScopesForgetRoles, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, CheckedScopesForgetRoles, (Datum) 0);
		checked_callback = true;
	}
	c = &checked_scopes[checked_next];
	checked_next = (checked_next + 1) % CHECKED_SCOPES;
	if (c->scope != NULL)
		pfree(c->scope);
	c->userid = GetUserId();
	c->nspid = a->nspid;
	c->scope = (text *) MemoryContextAlloc(IdemCacheContext(), VARSIZE_ANY(a->scope));
	memcpy(c->scope, a->scope, VARSIZE_ANY(a->scope));
}
