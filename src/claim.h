/*-------------------------------------------------------------------------
 *
 * claim.h
 *	  Claims (claim.c): the outcome and the result row; the checked
 *	  arguments and the claims a transaction made are claimed.h's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CLAIM_H
#define IDEMPOTENCY_CLAIM_H

#include "claimed.h"

/* Columns of idem_claim's (and idem_execute's) result */
enum
{
	CLAIM_OUTCOME,
	CLAIM_TOKEN,
	CLAIM_STATUS,
	CLAIM_RESPONSE_CODE,
	CLAIM_RESPONSE,
	CLAIM_RETRY_AFTER,
	CLAIM_RECOVERY_POINT,
	IDEM_CLAIM_NCOLUMNS
};

extern void IdemClaimArgsFrom(FunctionCallInfo fcinfo, const char *fname,
							  int keyarg, int requestarg, int scopearg,
							  Interval *lease, Interval *retention, bool wait,
							  IdemClaimArgs *a);
extern void IdemClaimArgsInit(FunctionCallInfo fcinfo, const char *fname,
							  text *key, text *scope, Interval *lease,
							  Interval *retention, bool wait, IdemClaimArgs *a);
extern int32 IdemMaxAttemptsArg(FunctionCallInfo fcinfo, int argno, IdemClaimArgs *a);

/* What a claim answers (idem_claim's outcome column) */
typedef enum IdemOutcome
{
	IDEM_OUTCOME_NONE = -1,		/* a probe found no row */
	IDEM_OUTCOME_NEW,
	IDEM_OUTCOME_REPLAY,
	IDEM_OUTCOME_IN_PROGRESS,
	IDEM_OUTCOME_RECLAIMED,
	IDEM_OUTCOME_STALE,
	IDEM_OUTCOME_MISMATCH,		/* only with answer_mismatch (batches) */
	IDEM_NUM_OUTCOMES
} IdemOutcome;

extern IdemOutcome IdemClaim(IdemClaimArgs *a, TupleDesc desc, Datum *values,
							 bool *nulls);
extern const char *IdemOutcomeName(IdemOutcome outcome);

#endif							/* IDEMPOTENCY_CLAIM_H */
