/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters per database in shared memory (stats.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_STATS_H
#define IDEMPOTENCY_STATS_H

#include "datatype/timestamp.h"

typedef enum IdemStat
{
	IDEM_STAT_CLAIM_NEW,
	IDEM_STAT_CLAIM_REPLAY,
	IDEM_STAT_CLAIM_IN_PROGRESS,
	IDEM_STAT_CLAIM_RECLAIMED,
	IDEM_STAT_CLAIM_STALE,
	IDEM_STAT_MISMATCH,
	IDEM_STAT_COMPLETE,
	IDEM_STAT_FAIL,
	IDEM_STAT_STALE_TOKEN,
	IDEM_STAT_EXPIRED,			/* stale leases expired (worker or idem_expire) */
	IDEM_STAT_DELETED,			/* rows past expires_at deleted */
	IDEM_STAT_WORKER_PASSES,
	IDEM_STAT_WORKER_ERRORS,
	/*
	 * Counters added since 0.3.0: idem_stats() and idem_stats_databases()
	 * show them after stats_reset, in this order (stats.c, FillStats).  A
	 * new one goes last here and as the last OUT column of both functions
	 * in the version's install step; older declarations get the counters
	 * they name.
	 */
	IDEM_STAT_ATTEMPTS_EXHAUSTED,	/* takeovers past the attempts limit: keys made final */
	IDEM_STAT_CLAIM_AWAITED,	/* claims that waited for an in-flight result */
	IDEM_NUM_STATS
} IdemStat;

/* The counters idem_stats() had before 0.4.0 (its older declarations) */
#define IDEM_NUM_STATS_0_3	(IDEM_STAT_WORKER_ERRORS + 1)

extern void IdemStatsInit(void);
extern Size IdemStatsShmemSize(void);
extern void IdemStatsShmemRequest(void);
extern void IdemStatsShmemAttach(void);
extern void IdemStatsAdd(IdemStat stat, int64 n);
extern void IdemStatsBatch(int64 rows);
extern void IdemStatsWorkerPass(TimestampTz end);
extern void IdemStatsPrepare(void);

#endif							/* IDEMPOTENCY_STATS_H */
