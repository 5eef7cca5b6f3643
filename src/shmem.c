/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The extension's shared memory: the counters (stats.c, with their
 *	  lock), the launcher's pass flags (worker.c) and the waiters' wake-up
 *	  slots (await.c), asked for and attached in one place.
 *
 * Shared memory can only be had when the library is preloaded
 * (shared_preload_libraries); _PG_init installs the hooks then.  Each part
 * says how much it needs and fills its struct the first time it is made.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "common.h"
#include "stats.h"
#include "worker.h"
#include "await.h"
#include "shmem.h"

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Ask for every part's shared memory */
static void
idem_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(add_size(IdemStatsShmemSize(), IdemWorkerShmemSize()),
									 IdemAwaitShmemSize()));
	IdemStatsShmemRequest();
}

/* Attach to every part's shared memory, making it at postmaster start */
static void
idem_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	IdemStatsShmemAttach();
	IdemWorkerShmemAttach();
	IdemAwaitShmemAttach();
	LWLockRelease(AddinShmemInitLock);
}

/* Install the hooks; called from _PG_init while preloading */
void
IdemShmemInit(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = idem_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = idem_shmem_startup;
}
