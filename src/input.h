/*-------------------------------------------------------------------------
 *
 * input.h
 *	  Checks of what callers pass: keys, intervals, responses, recovery
 *	  points (input.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_INPUT_H
#define IDEMPOTENCY_INPUT_H

#include "common.h"

extern void IdemValidateKey(text *key, const char *what);
extern void IdemGetKeyArgs(FunctionCallInfo fcinfo, int keyarg, int scopearg,
						   text **key, text **scope);
extern char *IdemKeyForMessage(text *key);
extern Interval *IdemSecondsInterval(int seconds);
extern void IdemCheckInterval(Interval *iv, const char *what, TimestampTz now,
							  text *key, text *scope);
extern int	IdemErrdetailKey(text *key, text *scope);
extern void IdemCheckResponse(Datum response, text *key, text *scope);
extern bool IdemResponseFitsIn(Datum response, Size extra);
extern void IdemCheckRecoveryPoint(text *recovery_point, text *key, text *scope);

/* Keys in one batch at most: bounds its memory and its sort's time */
#define IDEM_BATCH_MAX_KEYS 10000

extern int	IdemCompareKeys(text *x, text *y);
extern int	IdemArrayArg(FunctionCallInfo fcinfo, int argno, const char *what,
						 Oid elemtype, Datum **elems, bool **nulls);

#endif							/* IDEMPOTENCY_INPUT_H */
