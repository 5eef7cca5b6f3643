/*-------------------------------------------------------------------------
 *
 * claimed.h
 *	  A claim's checked arguments, and the claims this transaction made
 *	  (claimed.c): what claim.c, await.c and keylock.c share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CLAIMED_H
#define IDEMPOTENCY_CLAIMED_H

#include "utils/timestamp.h"

#include "store.h"

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
	bool		wrote;			/* set by IdemClaim: it wrote the key's row */
	Oid			nspid;
	TimestampTz now;			/* the time the claim is made at */
	IdemStamp	stamp;			/* the times the call writes (IdemStampEnd at its end) */
} IdemClaimArgs;

/*
 * The write's times, taken now (after every wait so far and its planning)
 * from the call's stamp, which moves them forward at the call's end if
 * the call waits after this.  Inline: every write of a claim takes them.
 */
static inline void
IdemStampWrite(IdemClaimArgs *a, IdemStmt stmt, IdemArgs *args)
{
	TimestampTz lease_end;

	a->now = IdemStampArgs(&a->stamp, stmt, a->nspid, args);
	lease_end = IdemTimePlus(a->now, a->lease);
	IdemArg(args, IDEM_PARAM_NOW, TimestampTzGetDatum(a->now));
	IdemArg(args, IDEM_PARAM_LEASE_END, TimestampTzGetDatum(lease_end));
	IdemArg(args, IDEM_PARAM_EXPIRES_AT,
			TimestampTzGetDatum(IdemTimePlus(lease_end, a->retention)));
}

/* The claims this transaction made, so that it may leave their tokens out */
extern void IdemRememberClaim(text *scope, text *key, int64 token);
extern bool IdemRecallClaim(text *scope, text *key, int64 *token);
extern void IdemClaimedInit(void);

#endif							/* IDEMPOTENCY_CLAIMED_H */
