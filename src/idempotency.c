/*-------------------------------------------------------------------------
 *
 * idempotency.c
 *	  Module entry point: _PG_init, on top of every other module, which
 *	  none of them includes (tools/include-graph.sh checks it).
 *
 * Everything here runs once per backend when the library is loaded, either
 * through shared_preload_libraries or on the first call of a function.
 * The GUCs are defined in both cases; only preloading sets up the shared
 * memory (shmem.c) and registers the background worker (worker.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "settings.h"
#include "keylock.h"
#include "claimed.h"
#include "worker.h"
#include "shmem.h"
#include "stats.h"
#include "guard.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * Define the extension's settings, and start each module that needs it.
 */
void
_PG_init(void)
{
	IdemSettingsInit();
	IdemStatsInit();
	if (process_shared_preload_libraries_in_progress)
		IdemShmemInit();
	IdemWorkerInit();
	IdemGuardInit();
	IdemKeyLockInit();
	IdemClaimedInit();

	MarkGUCPrefixReserved("idempotency");
}
