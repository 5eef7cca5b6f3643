/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Shims over the differences between PostgreSQL major versions.
 *
 * Only macros live here, so that no function body carries an #if.  The
 * extension is built (-Wall -Wextra -Werror) and tested on PostgreSQL 15,
 * 17, 18 and 19, the versions test/run.sh runs; 16 has no Debian package
 * to test it on.
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_COMPAT_H
#define IDEMPOTENCY_COMPAT_H

#include "nodes/parsenodes.h"
#include "storage/proc.h"

/* Local id of the current top-level transaction. */
#if PG_VERSION_NUM >= 170000
#define IdemCurrentLxid()	(MyProc->vxid.lxid)
#else
#define IdemCurrentLxid()	(MyProc->lxid)
#endif

#if PG_VERSION_NUM < 150000
#error "idempotency needs PostgreSQL 15 or later"
#endif

/* object_ownercheck replaced pg_class_ownercheck in 16. */
#if PG_VERSION_NUM >= 160000
#define IdemOwnsRelation(relid, roleid) \
	object_ownercheck(RelationRelationId, relid, roleid)
#else
#define IdemOwnsRelation(relid, roleid)	pg_class_ownercheck(relid, roleid)
#endif

/*
 * Every GUC variable: an array of *n pointers to utils/guc_tables.h's
 * config_generic, let go with IdemGucVariablesDone.  From 16 on
 * get_guc_variables() counts them itself and pallocs the array; before,
 * it is guc.c's own.
 */
#if PG_VERSION_NUM >= 160000
#define IdemGucVariables(n)	get_guc_variables(n)
#define IdemGucVariablesDone(vars)	pfree(vars)
#else
#define IdemGucVariables(n)	(*(n) = GetNumConfigOptions(), get_guc_variables())
#define IdemGucVariablesDone(vars)	((void) (vars))
#endif

/* c.h's Abs() went in 17 (i64abs() and friends replaced it). */
#ifndef Abs
#define Abs(x)	((x) >= 0 ? (x) : -(x))
#endif

/*
 * A deliberate fall through to the next case label: c.h's pg_fallthrough
 * from 19 on, whose -Wimplicit-fallthrough=5 accepts no comment in its place.
 */
#ifdef pg_fallthrough
#define IdemFallthrough		pg_fallthrough
#elif defined(__has_attribute)
#if __has_attribute(fallthrough)
#define IdemFallthrough		__attribute__((fallthrough))
#endif
#endif
#ifndef IdemFallthrough
#define IdemFallthrough		((void) 0)
#endif

/*
 * CLUSTER: 19 replaced ClusterStmt with RepackStmt, which REPACK, CLUSTER
 * and VACUUM FULL all parse into; its table is a VacuumRelation's.  The
 * statement's node tag, its table (a RangeVar, or NULL) and the index it
 * names (or NULL).
 */
#if PG_VERSION_NUM >= 190000
#define T_IdemClusterStmt	T_RepackStmt
#define IdemClusterTable(stmt) \
	(((RepackStmt *) (stmt))->relation ? ((RepackStmt *) (stmt))->relation->relation : NULL)
#define IdemClusterIndex(stmt)	(((RepackStmt *) (stmt))->indexname)
#else
#define T_IdemClusterStmt	T_ClusterStmt
#define IdemClusterTable(stmt)	(((ClusterStmt *) (stmt))->relation)
#define IdemClusterIndex(stmt)	(((ClusterStmt *) (stmt))->indexname)
#endif

/*
 * A backend's PROCLOCKs of one lock partition (the locks it holds or awaits
 * in the shared lock table), read under that partition's lock: the first,
 * and the one after pl, NULL at the end.  16 made the lists dlists; before,
 * SHM_QUEUEs.
 */
#if PG_VERSION_NUM >= 160000
#define IdemProcLockFirst(proc, i) \
	(dlist_is_empty(&(proc)->myProcLocks[i]) ? (PROCLOCK *) NULL : \
	 dlist_container(PROCLOCK, procLink, dlist_head_node(&(proc)->myProcLocks[i])))
#define IdemProcLockNext(proc, i, pl) \
	(dlist_has_next(&(proc)->myProcLocks[i], &(pl)->procLink) ? \
	 dlist_container(PROCLOCK, procLink, dlist_next_node(&(proc)->myProcLocks[i], &(pl)->procLink)) : \
	 (PROCLOCK *) NULL)
#else
#define IdemProcLockFirst(proc, i) \
	((PROCLOCK *) SHMQueueNext(&(proc)->myProcLocks[i], &(proc)->myProcLocks[i], \
							   offsetof(PROCLOCK, procLink)))
#define IdemProcLockNext(proc, i, pl) \
	((PROCLOCK *) SHMQueueNext(&(proc)->myProcLocks[i], &(pl)->procLink, \
							   offsetof(PROCLOCK, procLink)))
#endif

#endif							/* IDEMPOTENCY_COMPAT_H */
