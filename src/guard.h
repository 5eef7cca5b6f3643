/*-------------------------------------------------------------------------
 *
 * guard.h
 *	  The guard against table locks (guard.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_GUARD_H
#define IDEMPOTENCY_GUARD_H


extern void IdemGuardInit(void);

#endif							/* IDEMPOTENCY_GUARD_H */
