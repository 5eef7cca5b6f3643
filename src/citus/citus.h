/*-------------------------------------------------------------------------
 *
 * citus/citus.h
 *	  Everything the extension knows of Citus, in src/citus/: its catalogs
 *	  (pg_dist_*), the shard of a key's scope and holding it, this node's
 *	  group and its shards of the table.  The rest of src/ asks here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CITUS_H
#define IDEMPOTENCY_CITUS_H

#include "nodes/pg_list.h"

extern bool IdemCitusPresent(void);
extern int64 IdemCitusNodeGroup(int64 max);

/* What expiry works on (IdemCitusExpiryTargets) */
typedef enum IdemExpiryTarget
{
	IDEM_EXPIRY_TABLE,			/* the table itself: not a Citus table */
	IDEM_EXPIRY_SHARDS,			/* this node's shards of it (maybe none) */
	IDEM_EXPIRY_SKIP			/* locked by a change under way: not now */
} IdemExpiryTarget;

extern IdemExpiryTarget IdemCitusExpiryTargets(Oid nspid, Oid relid,
											   bool skip_locked, List **shards);

/* the key's shard (shards.c) */

/* A key's shard (Citus): its id, and its relation where this node holds it */
typedef struct IdemShard
{
	int64		shardid;
	Oid			relid;			/* InvalidOid: not on this node */
} IdemShard;

/* relid: idempotency_keys (IdemKeysRelid) of the extension in schema nspid */
extern bool IdemKeyShardIsLocal(Oid relid, text *scope);
extern bool IdemKeyShard(Oid nspid, Oid relid, text *scope, IdemShard *out);
extern void IdemCitusHoldShard(Oid relid, int64 shardid);

#endif							/* IDEMPOTENCY_CITUS_H */
