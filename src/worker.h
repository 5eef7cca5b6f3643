/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The launcher and expiry workers (worker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_WORKER_H
#define IDEMPOTENCY_WORKER_H


extern void IdemWorkerInit(void);
extern Size IdemWorkerShmemSize(void);
extern void IdemWorkerShmemAttach(void);

#endif							/* IDEMPOTENCY_WORKER_H */
