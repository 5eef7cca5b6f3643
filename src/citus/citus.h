/*-------------------------------------------------------------------------
 *
 * citus/citus.h
 *	  Everything the extension knows of Citus, in src/citus/: its catalogs
 *	  (pg_dist_*), the shard of a key's scope and holding it, where a key's
 *	  lock is taken, how our statements are planned, this node's group and
 *	  its shards of the table.  The rest of src/ asks here, one question per
 *	  decision; on a server without Citus each answers at once.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_CITUS_H
#define IDEMPOTENCY_CITUS_H

#include "nodes/pg_list.h"

extern bool IdemCitusPresent(void);
extern int64 IdemCitusNodeGroup(int64 max);

/* Plans of the statements the extension keeps: custom ones only? */
extern bool IdemCitusCustomPlansOnly(void);

/*
 * A key's statements (relid: idempotency_keys, IdemKeysRelid, of the
 * extension in schema nspid).  Before a statement on the key of scope:
 * hold its shard, and is the shard on this node (run the statement with
 * the scope inlined)?  Is the key's lock taken on this node?
 */
extern bool IdemCitusHoldKeyShard(Oid nspid, Oid relid, text *scope);
extern bool IdemCitusKeyLockHere(Oid relid, text *scope);

/* What expiry works on (IdemCitusExpiryTargets) */
typedef enum IdemExpiryTarget
{
	IDEM_EXPIRY_TABLE,			/* the table itself: not a Citus table */
	IDEM_EXPIRY_SHARDS,			/* this node's shards of it (maybe none) */
	IDEM_EXPIRY_SKIP			/* locked by a change under way: not now */
} IdemExpiryTarget;

extern IdemExpiryTarget IdemCitusExpiryTargets(Oid nspid, Oid relid,
											   bool skip_locked, List **shards);

#endif							/* IDEMPOTENCY_CITUS_H */
