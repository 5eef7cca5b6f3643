/*-------------------------------------------------------------------------
 *
 * keylock.h
 *	  Key locks (keylock.c): the lock a claim takes on its key before it
 *	  writes the key's row.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_KEYLOCK_H
#define IDEMPOTENCY_KEYLOCK_H

#include "claimed.h"

extern bool IdemLockKey(IdemClaimArgs *a, bool wait);
extern int	IdemKeyLocksHeld(void);
extern void IdemUnlockKeySince(IdemClaimArgs *a, int mark);
extern void IdemKeyLockInit(void);

#endif							/* IDEMPOTENCY_KEYLOCK_H */
