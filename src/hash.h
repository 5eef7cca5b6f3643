/*-------------------------------------------------------------------------
 *
 * hash.h
 *	  Request hashes and key lock ids (hash.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_HASH_H
#define IDEMPOTENCY_HASH_H

#include "fmgr.h"
#include "utils/numeric.h"

extern PGDLLEXPORT bytea *IdemHashJsonb(Datum jsonb);	/* also bench/floor's */
extern int64 IdemKeyLockId(text *scope, text *key);
extern Size IdemNumericTextLength(Numeric num);

#endif							/* IDEMPOTENCY_HASH_H */
