/*-------------------------------------------------------------------------
 *
 * session.c
 *	  What every function that runs SQL wraps its statements in: the
 *	  search_path pin and the SPI session, a subtransaction that expects
 *	  some errors, and the memory context of the per-backend caches.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "session.h"
#include "settings.h"

/*
 * Pin search_path to pg_catalog, pg_temp for the extension's own
 * statements; undo with IdemUnpinSearchPath(pin), in the same
 * (sub)transaction.  An error in between is undone by the
 * (sub)transaction's abort, as a SET clause's setting is.
 *
 * Every C function that runs SQL pins the path this way, for exactly the
 * span of its own statements (IdemConnect for a whole SPI session; in
 * idem_execute around each of its own statements, since the caller's
 * statement runs under the caller's path), instead of by a SET clause.
 * The statements are schema-qualified throughout anyway; the pin keeps
 * their saved plans under one path, so that the plan cache's path check
 * passes instead of parsing them again, and keeps the caller's path from
 * the code they run in turn (a trigger or a row level security policy on
 * the table, which may have a SET clause of its own).
 *
 * The pin sets the GUC, exactly as a SET clause does (a save, the setting,
 * a restore at the nest level's end), and nothing cheaper: an override
 * search path (PushOverrideSearchPath, before PostgreSQL 17) makes
 * PostgreSQL ignore the GUC while it is pushed, so a trigger's or a policy
 * helper's own SET search_path = app, pg_temp would not apply under it, and
 * an unqualified name in that helper would resolve in the caller's
 * temporary schema: a tenant's temporary table could take a SECURITY
 * DEFINER audit trigger's rows, or stand in for a policy helper's mapping
 * table, and run the tenant's code as the helper's owner (PostgreSQL
 * dropped that use of the override for the same reason, CVE-2023-2454).
 * test/pgtap/security.sql checks both that the extension's statements run
 * under the pinned path and that such a trigger's own path applies.
 */
int
IdemPinSearchPath(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

void
IdemUnpinSearchPath(int level)
{
	AtEOXact_GUC(true, level);
}

/*
 * SPI_connect with search_path pinned for the SPI session; returns the pin
 * for IdemFinish.
 */
int
IdemConnect(void)
{
	IdemSettingsCheck();
	SPI_connect();
	return IdemPinSearchPath();
}

/* The pin undone, then SPI_finish */
void
IdemFinish(int pin)
{
	IdemUnpinSearchPath(pin);
	SPI_finish();
}

/*
 * Run body(arg) in a subtransaction of its own.  Returns 0 when it
 * committed; when it raised an error whose SQLSTATE is in caught (ended by
 * 0), returns that SQLSTATE, the subtransaction rolled back and the error
 * dropped (or, when kept is not NULL, handed back there, in the caller's
 * memory context, to raise again with ReThrowError or free); any other
 * error is raised again.  Memory allocated by body in the caller's memory
 * context stays there; the caller's resource owner stays current.
 */
int
IdemRunInSubtransaction(IdemSubxactBody body, void *arg, const int *caught,
						ErrorData **kept)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile int sqlstate = 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		body(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		const int  *c;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		for (c = caught; *c != 0 && *c != edata->sqlerrcode; c++)
			;
		if (*c == 0)
			ReThrowError(edata);
		sqlstate = edata->sqlerrcode;
		if (kept != NULL)
			*kept = edata;
		else
			FreeErrorData(edata);
	}
	PG_END_TRY();
	return sqlstate;
}

/*
 * The memory of this backend's caches (idem_execute's statements and its
 * to_jsonb call, the distributed table's shard map and lock function), under
 * one name in pg_backend_memory_contexts: "idempotency cache".
 */
MemoryContext
IdemCacheContext(void)
{
	static MemoryContext cache_cxt = NULL;

	if (cache_cxt == NULL)
		cache_cxt = AllocSetContextCreate(TopMemoryContext, "idempotency cache",
										  ALLOCSET_SMALL_SIZES);
	return cache_cxt;
}
