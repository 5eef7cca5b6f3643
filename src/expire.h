/*-------------------------------------------------------------------------
 *
 * expire.h
 *	  One expiry batch (expire.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_EXPIRE_H
#define IDEMPOTENCY_EXPIRE_H

#include "datatype/timestamp.h"

typedef struct IdemExpireResult
{
	int64		expired;		/* stale processing rows made takeover-ready */
	int64		deleted;		/* rows past expires_at deleted */
	int64		rekeyed;		/* rows given their next due time */
} IdemExpireResult;

extern int	IdemExpireBatch(Oid nspid, TimestampTz now, int batch_size,
							bool skip_locked, IdemExpireResult *result);

#endif							/* IDEMPOTENCY_EXPIRE_H */
