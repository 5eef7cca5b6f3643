/*-------------------------------------------------------------------------
 *
 * claim.h
 *	  Claims (claim.c): the checked arguments, the outcome, the result row,
 *	  and the claims a transaction made.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CLAIM_H
#define IDEMPOTENCY_CLAIM_H

#include "store.h"

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

/* The checked arguments of a claim */
typedef struct IdemClaimArgs
{
	text	   *key;
	text	   *scope;
	bytea	   *hash;			/* NULL when no request was given */
	Interval   *lease;
	Interval   *retention;
	bool		wait;
	bool		probe;			/* IDEM_OUTCOME_NONE, writing nothing, if no row */
	int32		max_attempts;	/* takeovers past this many attempts end the key; 0: no limit */
	Interval   *await_result;	/* wait this long for a claim in flight; NULL: not at all */
	bool		answer_mismatch;	/* IDEM_OUTCOME_MISMATCH rather than ERROR IK001 */
	Oid			nspid;
	TimestampTz now;			/* the time the claim is made at */
	IdemStamp	stamp;			/* the times the call writes (IdemStampEnd at its end) */
} IdemClaimArgs;

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
extern void IdemCheckScopeBeforeLock(IdemClaimArgs *a);
extern bool IdemSameRequest(bytea *stored, bytea *given);

/* The claims this transaction made, so that it may leave their tokens out */
extern void IdemRememberClaim(text *scope, text *key, int64 token);
extern bool IdemRecallClaim(text *scope, text *key, int64 *token);

#endif							/* IDEMPOTENCY_CLAIM_H */
