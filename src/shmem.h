/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  The extension's shared memory (shmem.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_SHMEM_H
#define IDEMPOTENCY_SHMEM_H


extern void IdemShmemInit(void);

#endif							/* IDEMPOTENCY_SHMEM_H */
