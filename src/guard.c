/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  Refuse LOCK TABLE on idempotency_keys in blocking modes to roles that
 *	  neither own the table nor administer it.
 *
 * The functions run as the caller, so an application role holds UPDATE and
 * DELETE on idempotency_keys; with row level security it sees and changes
 * only its own scope's rows.  But PostgreSQL lets any role with UPDATE or
 * DELETE on a table LOCK it in any mode, and a lock stronger than ROW
 * EXCLUSIVE stalls every other tenant's claims until that transaction
 * ends.  This ProcessUtility hook refuses such a LOCK, on the table itself
 * or on a view that reaches it, unless the current role owns the table or
 * has the privileges of idempotency_admin (or is a superuser).  ROW
 * EXCLUSIVE and weaker modes, which claims take anyway, stay allowed.
 *
 * It works in every backend that has loaded the library: all of them when
 * it is in shared_preload_libraries (as the background worker needs), else
 * from the first call of an extension function in that session.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "compat.h"
#include "idempotency.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* Lock mode names as LOCK TABLE spells them, by LOCKMODE */
static const char *const lock_mode_names[] = {
	"", "ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE",
	"SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"
};

typedef struct ReachesContext
{
	Oid			extoid;			/* the extension */
	Oid			keys;			/* idempotency_keys, once found */
	List	   *path;			/* views being read, outermost first */
} ReachesContext;

static bool RelationReaches(Oid relid, ReachesContext *cxt);

/* Does a view's query name the target, directly or through other views? */
static bool
ReachesWalker(Node *node, ReachesContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION && RelationReaches(rte->relid, cxt))
			return true;
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, ReachesWalker, (void *) cxt,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, ReachesWalker, (void *) cxt);
}

/*
 * Would LOCK TABLE on relid lock the target?  It does for the target
 * itself, and for a view whose query reaches it (LOCK recurses into views).
 */
static bool
RelationReaches(Oid relid, ReachesContext *cxt)
{
	Relation	rel;
	bool		reaches = false;
	char		relkind = get_rel_relkind(relid);
	char	   *relname;

	if (relkind == RELKIND_RELATION)
	{
		relname = get_rel_name(relid);
		if (relname == NULL || strcmp(relname, "idempotency_keys") != 0 ||
			getExtensionOfObject(RelationRelationId, relid) != cxt->extoid)
			return false;
		cxt->keys = relid;
		return true;
	}
	if (relkind != RELKIND_VIEW)
		return false;

	/*
	 * A view's stored query names the view itself (PostgreSQL 15's OLD and
	 * NEW entries), and views can form cycles: read each view once per path.
	 */
	if (list_member_oid(cxt->path, relid))
		return false;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	cxt->path = lappend_oid(cxt->path, relid);
	rel = relation_open(relid, AccessShareLock);
	reaches = ReachesWalker((Node *) get_view_query(rel), cxt);
	relation_close(rel, AccessShareLock);
	cxt->path = list_delete_last(cxt->path);
	return reaches;
}

static void
CheckLockStmt(LockStmt *stmt)
{
	Oid			extoid;
	Oid			admin;
	ListCell   *lc;

	if (stmt->mode <= RowExclusiveLock || superuser() || !IsTransactionState())
		return;
	extoid = get_extension_oid("idempotency", true);
	if (!OidIsValid(extoid))
		return;
	admin = get_role_oid("idempotency_admin", true);
	if (OidIsValid(admin) && has_privs_of_role(GetUserId(), admin))
		return;

	foreach(lc, stmt->relations)
	{
		RangeVar   *rv = lfirst_node(RangeVar, lc);
		Oid			relid = RangeVarGetRelid(rv, NoLock, true);
		ReachesContext cxt = {extoid, InvalidOid, NIL};

		if (!OidIsValid(relid) || !RelationReaches(relid, &cxt) ||
			IdemOwnsRelation(cxt.keys, GetUserId()))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to lock idempotency_keys in %s mode",
						lock_mode_names[stmt->mode]),
				 relid != cxt.keys ?
				 errdetail("View \"%s\" reads idempotency_keys.", rv->relname) : 0,
				 errhint("A lock stronger than ROW EXCLUSIVE would stall every other claim of every scope. "
						 "Only the table's owner and members of idempotency_admin may take one.")));
	}
}

static void
idem_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	if (IsA(pstmt->utilityStmt, LockStmt))
		CheckLockStmt((LockStmt *) pstmt->utilityStmt);

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

void
IdemGuardInit(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = idem_ProcessUtility;
}
