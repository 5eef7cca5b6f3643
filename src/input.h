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

#include "idempotency.h"

extern void IdemValidateKey(text *key, const char *what);
extern void IdemGetKeyArgs(FunctionCallInfo fcinfo, int keyarg, int scopearg,
						   text **key, text **scope);
extern char *IdemKeyForMessage(text *key);
extern Interval *IdemSecondsInterval(int seconds);
extern void IdemCheckInterval(Interval *iv, const char *what, TimestampTz now,
							  text *key, text *scope);
extern int	IdemErrdetailKey(text *key, text *scope);
extern void IdemCheckResponse(Datum response, text *key, text *scope);
extern void IdemCheckRecoveryPoint(text *recovery_point, text *key, text *scope);

#endif							/* IDEMPOTENCY_INPUT_H */
