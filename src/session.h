/*-------------------------------------------------------------------------
 *
 * session.h
 *	  The SPI session of a call (session.c): connecting with the search
 *	  path pinned, the cache's memory, subtransactions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_SESSION_H
#define IDEMPOTENCY_SESSION_H

#include "utils/palloc.h"

/* The pin is exported: bench/floor's rules floor calls it */
extern PGDLLEXPORT int IdemPinSearchPath(void);
extern PGDLLEXPORT void IdemUnpinSearchPath(int pin);
extern int	IdemConnect(void);
extern void IdemFinish(int pin);
extern MemoryContext IdemCacheContext(void);
typedef void (*IdemSubxactBody) (void *arg);
extern int	IdemRunInSubtransaction(IdemSubxactBody body, void *arg,
									const int *caught, ErrorData **kept);

#endif							/* IDEMPOTENCY_SESSION_H */
