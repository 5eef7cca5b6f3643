/*-------------------------------------------------------------------------
 *
 * policy.h
 *	  A claim's scope checked against row level security before its key's
 *	  lock (policy.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_POLICY_H
#define IDEMPOTENCY_POLICY_H

#include "claimed.h"

extern void IdemCheckScopeBeforeLock(IdemClaimArgs *a);

#endif							/* IDEMPOTENCY_POLICY_H */
