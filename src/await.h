/*-------------------------------------------------------------------------
 *
 * await.h
 *	  Waiting for a claim in flight to finish (await.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_AWAIT_H
#define IDEMPOTENCY_AWAIT_H

#include "claimed.h"

/* The waiter re-reads the key's row at least this often */
#define IDEM_AWAIT_POLL_MS	10

extern Size IdemAwaitShmemSize(void);
extern void IdemAwaitShmemAttach(void);
extern Interval *IdemAwaitArg(Interval *iv, text *key, text *scope);
extern Interval *IdemAwaitDefault(void);
extern bool IdemAwaitInFlight(IdemClaimArgs *a);
extern void IdemAwaitNotify(text *scope, text *key);

#endif							/* IDEMPOTENCY_AWAIT_H */
