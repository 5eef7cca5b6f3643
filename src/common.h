/*-------------------------------------------------------------------------
 *
 * common.h
 *	  Declarations shared by the idempotency extension's source files: the
 *	  ground floor, which includes no other module.
 *
 * The extension keeps one row per (scope, key) in idempotency_keys and
 * reaches that table only through SPI with saved plans (store.c), so that
 * it also works where the table is a shell over shards (Citus).  Each
 * module has a header of its own (store.h, claim.h, input.h, hash.h,
 * expire.h, stats.h, worker.h, shmem.h, guard.h, citus/citus.h); this one
 * has what they all share: SQLSTATEs, a key's status.  The settings are
 * settings.h's; _PG_init (idempotency.c) is on top and has no header.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_COMMON_H
#define IDEMPOTENCY_COMMON_H

#include "fmgr.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "utils/elog.h"
#include "utils/numeric.h"

/*
 * SQLSTATEs of our own, class "IK" (implementation-defined classes start
 * with I..Z).  README.md lists them with their HTTP mapping.
 */
#define ERRCODE_IDEM_REQUEST_MISMATCH	MAKE_SQLSTATE('I','K','0','0','1')
#define ERRCODE_IDEM_STALE_TOKEN		MAKE_SQLSTATE('I','K','0','0','2')
#define ERRCODE_IDEM_NOT_PROCESSING		MAKE_SQLSTATE('I','K','0','0','3')
#define ERRCODE_IDEM_KEY_NOT_FOUND		MAKE_SQLSTATE('I','K','0','0','4')
#define ERRCODE_IDEM_TOKEN_REQUIRED		MAKE_SQLSTATE('I','K','0','0','5')
#define ERRCODE_IDEM_ROW_SECURITY_MISSING	MAKE_SQLSTATE('I','K','0','0','6')

/*
 * A call that spent longer than this off the CPU, asleep, after it stamped
 * its first row waited (for a lock, a row, I/O), and the times it wrote are
 * moved forward to count from its end (stamp.c): a lease is never shorter
 * than asked by more, plus the call's own work.
 */
#ifndef IDEM_STAMP_SLACK_USECS	/* bench/profile.sh sets it for callgrind */
#define IDEM_STAMP_SLACK_USECS	INT64CONST(10000)
#endif

/* Status of a key row, as the saved SELECT reports it */
typedef enum IdemStatus
{
	IDEM_PROCESSING = 0,
	IDEM_COMPLETED = 1,
	IDEM_FAILED = 2
} IdemStatus;

#endif							/* IDEMPOTENCY_COMMON_H */
