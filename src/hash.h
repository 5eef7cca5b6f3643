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

/*
 * Do the stored and the given request hashes count as the same request?
 * Inline: claim.c's decision and await.c's wait both ask it on every read.
 */
static inline bool
IdemSameRequest(bytea *stored, bytea *given)
{
	if (stored == NULL || given == NULL)
		return stored == NULL && given == NULL;
	return VARSIZE_ANY_EXHDR(stored) == VARSIZE_ANY_EXHDR(given) &&
		memcmp(VARDATA_ANY(stored), VARDATA_ANY(given),
			   VARSIZE_ANY_EXHDR(given)) == 0;
}

#endif							/* IDEMPOTENCY_HASH_H */
