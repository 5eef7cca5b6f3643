/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Shims over the differences between PostgreSQL major versions.
 *
 * Only macros live here, so that no function body carries an #if.  The
 * extension is tested on PostgreSQL 15; the shims keep 14 to 17 building.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_COMPAT_H
#define IDEMPOTENCY_COMPAT_H

#include "storage/proc.h"

/* Local id of the current top-level transaction. */
#if PG_VERSION_NUM >= 170000
#define IdemCurrentLxid()	(MyProc->vxid.lxid)
#else
#define IdemCurrentLxid()	(MyProc->lxid)
#endif

/* MarkGUCPrefixReserved arrived in 15; EmitWarningsOnPlaceholders before. */
#if PG_VERSION_NUM >= 150000
#define IdemReserveGUCPrefix(prefix)	MarkGUCPrefixReserved(prefix)
#else
#define IdemReserveGUCPrefix(prefix)	EmitWarningsOnPlaceholders(prefix)
#endif

/* shmem_request_hook arrived in 15. */
#if PG_VERSION_NUM >= 150000
#define IDEM_HAVE_SHMEM_REQUEST_HOOK 1
#endif


/* pg_cryptohash_final() took the digest length from 15 on. */
#if PG_VERSION_NUM >= 150000
#define IdemCryptohashFinal(ctx, dest, len)	pg_cryptohash_final(ctx, dest, len)
#else
#define IdemCryptohashFinal(ctx, dest, len)	pg_cryptohash_final(ctx, dest)
#endif

/* object_ownercheck replaced pg_class_ownercheck in 16. */
#if PG_VERSION_NUM >= 160000
#define IdemOwnsRelation(relid, roleid) \
	object_ownercheck(RelationRelationId, relid, roleid)
#else
#define IdemOwnsRelation(relid, roleid)	pg_class_ownercheck(relid, roleid)
#endif

/* c.h's Abs() is gone from 17 on. */
#ifndef Abs
#define Abs(x)			((x) >= 0 ? (x) : -(x))
#endif

#endif							/* IDEMPOTENCY_COMPAT_H */
