/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  Refuse, before PostgreSQL queues the lock, every statement by which a
 *	  role that neither owns idempotency_keys nor administers it would lock
 *	  the table more strongly than ROW EXCLUSIVE.
 *
 * The functions run as the caller, so an application role holds UPDATE and
 * DELETE on idempotency_keys; with row level security it sees and changes
 * only its own scope's rows.  But a lock stronger than ROW EXCLUSIVE on the
 * table, even one only waited for, stalls every other tenant's claims (and,
 * ACCESS EXCLUSIVE, every replay) behind it, for as long as the session
 * that asked for it keeps waiting.  PostgreSQL takes these locks before it
 * checks the privilege the statement needs in these cases, found by
 * reading the PostgreSQL 15 utility code for every statement that names a
 * relation:
 *	  LOCK TABLE (also on a view that reads the table: LOCK recurses)
 *	  CREATE TRIGGER, CREATE RULE ON the table
 *	  DROP TRIGGER / RULE / POLICY [IF EXISTS] ... ON the table
 *	  ALTER TRIGGER ... ON the table, ALTER INDEX of one of its indexes,
 *		ALTER MATERIALIZED VIEW naming it, ... DEPENDS ON EXTENSION
 *	  CLUSTER (and from 19 on REPACK ... USING INDEX), ALTER TABLE ...
 *		CLUSTER ON and REPLICA IDENTITY USING INDEX of another table
 *		naming one of its indexes
 *	  COMMENT ON and SECURITY LABEL ON the table, its columns, constraints,
 *		triggers, rules, policies
 *	  CREATE TABLE ... REFERENCES it, INHERITS it, PARTITION OF it
 *	  ALTER TABLE of another table: ADD [COLUMN ...] REFERENCES it,
 *		ATTACH / DETACH PARTITION it, [NO] INHERIT it
 *	  CREATE STATISTICS ... FROM it
 *	  CREATE / ALTER PUBLICATION ... TABLE it
 * and the same statements naming the token sequence (every new claim takes
 * ROW EXCLUSIVE on it) or a table a row level security policy on the table
 * reads (the mapping table of docs/tenants.md: every claim reads it).
 * Every other statement on the table (ALTER TABLE, DROP, TRUNCATE, CREATE
 * INDEX, REINDEX, CLUSTER, REPACK, VACUUM, ANALYZE, CREATE / ALTER POLICY,
 * the RENAMEs) checks ownership or privilege before it locks, and is left
 * to PostgreSQL.  test/t/016_guard.pl issues each statement of both lists as
 * a tenant while another session holds a claim open, and checks that each
 * is refused or answered at once.
 *
 * This ProcessUtility hook refuses the statements of the first list, with
 * 42501, unless the current role owns the table or has the privileges of
 * idempotency_admin (or is a superuser).  LOCK in ROW EXCLUSIVE and weaker
 * modes, which claims take anyway, stays allowed.  It works in every
 * backend that has loaded the library: all of them when it is in
 * shared_preload_libraries (as the background worker needs), else from the
 * first call of an extension function in that session.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "rewrite/rowsecurity.h"

#include "compat.h"
#include "common.h"
#include "guard.h"

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* Lock mode names as LOCK TABLE spells them, by LOCKMODE */
static const char *const lock_mode_names[] = {
	"", "ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE",
	"SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"
};

/* A relation a statement would lock before checking privileges */
typedef struct GuardTarget
{
	RangeVar   *rv;
	LOCKMODE	mode;
	bool		views;			/* LOCK: the lock recurses into views */
} GuardTarget;

typedef struct ReachesContext
{
	Oid			extoid;			/* the extension */
	Oid			keys;			/* idempotency_keys, once found */
	List	   *path;			/* views being read, outermost first */
} ReachesContext;

static bool RelationReaches(Oid relid, bool views, ReachesContext *cxt);

/* Does a view's query name the target, directly or through other views? */
static bool
ReachesWalker(Node *node, ReachesContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		return rte->rtekind == RTE_RELATION && RelationReaches(rte->relid, true, cxt);
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, ReachesWalker, (void *) cxt,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, ReachesWalker, (void *) cxt);
}

/*
 * Is relid the extension's idempotency_keys, or its token sequence (every
 * new claim takes ROW EXCLUSIVE on it through nextval)?
 */
static bool
IsKeysTable(Oid relid, ReachesContext *cxt)
{
	char	   *relname = get_rel_name(relid);

	if (relname == NULL ||
		(strcmp(relname, "idempotency_keys") != 0 &&
		 strcmp(relname, "idempotency_token_seq") != 0 &&
		 strcmp(relname, "idempotency_row_security") != 0) ||
		getExtensionOfObject(RelationRelationId, relid) != cxt->extoid)
		return false;
	cxt->keys = relid;
	return true;
}

/* Does an expression (a policy's) read the relation cxt->keys names? */
static bool
ReadsRelationWalker(Node *node, Oid *relid)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
		return ((RangeTblEntry *) node)->rtekind == RTE_RELATION &&
			((RangeTblEntry *) node)->relid == *relid;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, ReadsRelationWalker, (void *) relid,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, ReadsRelationWalker, (void *) relid);
}

/* The schema of extension extoid (PostgreSQL 15 keeps its own copy static) */
static Oid
ExtensionNamespace(Oid extoid)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nspid = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nspid = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nspid;
}

/*
 * Does a row level security policy on idempotency_keys read relid (the
 * mapping table of docs/tenants.md)?  Every claim then reads it too, and a
 * lock queued on it stalls them as one on the table would.
 */
static bool
PolicyReads(Oid relid, ReachesContext *cxt)
{
	Oid			keys = get_relname_relid("idempotency_keys", ExtensionNamespace(cxt->extoid));
	Relation	rel;
	bool		reads = false;
	ListCell   *lc;

	if (!OidIsValid(keys) || keys == relid)
		return false;
	rel = relation_open(keys, AccessShareLock);
	if (rel->rd_rsdesc != NULL)
	{
		foreach(lc, rel->rd_rsdesc->policies)
		{
			RowSecurityPolicy *policy = (RowSecurityPolicy *) lfirst(lc);

			if (ReadsRelationWalker((Node *) policy->qual, &relid) ||
				ReadsRelationWalker((Node *) policy->with_check_qual, &relid))
				reads = true;
		}
	}
	relation_close(rel, AccessShareLock);
	if (reads)
		cxt->keys = keys;
	return reads;
}

/*
 * Would a lock on relid lock the target, or block its claims?  It does for
 * the table itself and for its indexes (claims take ROW EXCLUSIVE on
 * them), for a table a policy on it names and that table's indexes (each
 * claim reads them), and, with views, for a view whose query reaches it.
 */
static bool
RelationReaches(Oid relid, bool views, ReachesContext *cxt)
{
	Relation	rel;
	bool		reaches;
	char		relkind = get_rel_relkind(relid);

	if (relkind == RELKIND_RELATION)
		return IsKeysTable(relid, cxt) || PolicyReads(relid, cxt);
	if (relkind == RELKIND_PARTITIONED_TABLE)
		return PolicyReads(relid, cxt);
	if (relkind == RELKIND_SEQUENCE)
		return IsKeysTable(relid, cxt);
	if (relkind == RELKIND_INDEX || relkind == RELKIND_PARTITIONED_INDEX)
	{
		/* a claim reads an index of a table its policy reads too */
		Oid			table = IndexGetRelation(relid, true);

		return OidIsValid(table) && (IsKeysTable(table, cxt) || PolicyReads(table, cxt));
	}
	if (relkind != RELKIND_VIEW || !views)
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

static List *
AddTarget(List *targets, RangeVar *rv, LOCKMODE mode)
{
	GuardTarget *t;

	if (rv == NULL)
		return targets;
	t = palloc(sizeof(GuardTarget));
	t->rv = rv;
	t->mode = mode;
	t->views = false;
	return lappend(targets, t);
}

/*
 * The index that CLUSTER ... USING (REPACK ... USING INDEX), ALTER TABLE ...
 * CLUSTER ON and REPLICA IDENTITY USING INDEX name: PostgreSQL looks it up
 * in the table's schema and locks it before it checks that it belongs to
 * the table.
 */
static RangeVar *
IndexOfTable(RangeVar *table, const char *indexname)
{
	Oid			relid;

	if (table == NULL || indexname == NULL)
		return NULL;
	relid = RangeVarGetRelid(table, NoLock, true);
	if (!OidIsValid(relid))
		return NULL;
	return makeRangeVar(get_namespace_name(get_rel_namespace(relid)),
						pstrdup(indexname), -1);
}

/* The relation of a name list whose last element names a sub-object */
static RangeVar *
OwnerOfSubobject(Node *object)
{
	List	   *names = castNode(List, object);

	if (list_length(names) < 2)
		return NULL;
	return makeRangeVarFromNameList(list_truncate(list_copy(names),
												  list_length(names) - 1));
}

/* COMMENT ON / SECURITY LABEL ON: the relation the object belongs to */
static List *
AddObjectTarget(List *targets, ObjectType objtype, Node *object, LOCKMODE mode)
{
	switch (objtype)
	{
		case OBJECT_TABLE:
		case OBJECT_INDEX:
			return AddTarget(targets, makeRangeVarFromNameList(castNode(List, object)), mode);
		case OBJECT_COLUMN:
		case OBJECT_TABCONSTRAINT:
		case OBJECT_TRIGGER:
		case OBJECT_RULE:
		case OBJECT_POLICY:
			return AddTarget(targets, OwnerOfSubobject(object), mode);
		default:
			return targets;
	}
}

/* Foreign keys among a CREATE TABLE's elements or an added column */
static List *
AddForeignKeyTargets(List *targets, List *constraints)
{
	ListCell   *lc;

	foreach(lc, constraints)
	{
		Node	   *node = lfirst(lc);

		if (IsA(node, ColumnDef))
			targets = AddForeignKeyTargets(targets, ((ColumnDef *) node)->constraints);
		else if (IsA(node, Constraint) && ((Constraint *) node)->contype == CONSTR_FOREIGN)
			targets = AddTarget(targets, ((Constraint *) node)->pktable, ShareRowExclusiveLock);
	}
	return targets;
}

static List *
AddAlterTableTargets(List *targets, AlterTableStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		switch (cmd->subtype)
		{
			case AT_AddConstraint:
			case AT_AddColumn:
				targets = AddForeignKeyTargets(targets, list_make1(cmd->def));
				break;
			case AT_AttachPartition:
			case AT_DetachPartition:
			case AT_DetachPartitionFinalize:
				targets = AddTarget(targets, castNode(PartitionCmd, cmd->def)->name,
									AccessExclusiveLock);
				break;
			case AT_ReplicaIdentity:
				if (castNode(ReplicaIdentityStmt, cmd->def)->identity_type == REPLICA_IDENTITY_INDEX)
					targets = AddTarget(targets,
										IndexOfTable(stmt->relation,
													 castNode(ReplicaIdentityStmt, cmd->def)->name),
										ShareLock);
				break;
			case AT_ClusterOn:
				targets = AddTarget(targets, IndexOfTable(stmt->relation, cmd->name),
									ShareUpdateExclusiveLock);
				break;
			case AT_AddInherit:
			case AT_DropInherit:
				targets = AddTarget(targets, castNode(RangeVar, cmd->def),
									ShareUpdateExclusiveLock);
				break;
			default:
				break;
		}
	}
	return targets;
}

static List *
AddPublicationTargets(List *targets, List *pubobjects)
{
	ListCell   *lc;

	foreach(lc, pubobjects)
	{
		PublicationObjSpec *spec = lfirst_node(PublicationObjSpec, lc);

		if (spec->pubtable != NULL)
			targets = AddTarget(targets, spec->pubtable->relation, ShareUpdateExclusiveLock);
	}
	return targets;
}

/*
 * The relations a utility statement would lock more strongly than ROW
 * EXCLUSIVE before it checks the privilege it needs (the first list at
 * the top of this file).
 */
static List *
GuardTargets(Node *stmt)
{
	List	   *targets = NIL;
	ListCell   *lc;

	switch (nodeTag(stmt))
	{
		case T_LockStmt:
			foreach(lc, ((LockStmt *) stmt)->relations)
			{
				targets = AddTarget(targets, lfirst_node(RangeVar, lc), ((LockStmt *) stmt)->mode);
				((GuardTarget *) llast(targets))->views = true;
			}
			break;
		case T_CreateTrigStmt:
			targets = AddTarget(targets, ((CreateTrigStmt *) stmt)->relation, ShareRowExclusiveLock);
			break;
		case T_RuleStmt:
			targets = AddTarget(targets, ((RuleStmt *) stmt)->relation, AccessExclusiveLock);
			break;
		case T_DropStmt:
			{
				DropStmt   *drop = (DropStmt *) stmt;

				if (drop->removeType != OBJECT_TRIGGER && drop->removeType != OBJECT_RULE &&
					drop->removeType != OBJECT_POLICY)
					break;
				foreach(lc, drop->objects)
					targets = AddTarget(targets, OwnerOfSubobject(lfirst(lc)), AccessExclusiveLock);
				break;
			}
		case T_AlterObjectDependsStmt:
			{
				AlterObjectDependsStmt *dep = (AlterObjectDependsStmt *) stmt;

				/* the table (trigger, materialized view) or the index named */
				targets = AddTarget(targets, dep->relation, AccessExclusiveLock);
				break;
			}
		case T_CommentStmt:
			targets = AddObjectTarget(targets, ((CommentStmt *) stmt)->objtype,
									  ((CommentStmt *) stmt)->object, ShareUpdateExclusiveLock);
			break;
		case T_SecLabelStmt:
			targets = AddObjectTarget(targets, ((SecLabelStmt *) stmt)->objtype,
									  ((SecLabelStmt *) stmt)->object, AccessExclusiveLock);
			break;
		case T_CreateStmt:
		case T_CreateForeignTableStmt:
			{
				CreateStmt *create = (CreateStmt *) stmt;

				foreach(lc, create->inhRelations)
					targets = AddTarget(targets, lfirst_node(RangeVar, lc),
										create->partbound ? ShareUpdateExclusiveLock : AccessExclusiveLock);
				targets = AddForeignKeyTargets(targets, create->tableElts);
				targets = AddForeignKeyTargets(targets, create->constraints);
				break;
			}
		case T_AlterTableStmt:
			targets = AddAlterTableTargets(targets, (AlterTableStmt *) stmt);
			break;
		case T_IdemClusterStmt:	/* CLUSTER; from 19 on also REPACK */
			targets = AddTarget(targets, IndexOfTable(IdemClusterTable(stmt),
													  IdemClusterIndex(stmt)),
								AccessExclusiveLock);
			break;
		case T_CreateStatsStmt:
			foreach(lc, ((CreateStatsStmt *) stmt)->relations)
				if (IsA(lfirst(lc), RangeVar))
					targets = AddTarget(targets, lfirst_node(RangeVar, lc), ShareUpdateExclusiveLock);
			break;
		case T_CreatePublicationStmt:
			targets = AddPublicationTargets(targets, ((CreatePublicationStmt *) stmt)->pubobjects);
			break;
		case T_AlterPublicationStmt:
			targets = AddPublicationTargets(targets, ((AlterPublicationStmt *) stmt)->pubobjects);
			break;
		default:
			break;
	}
	return targets;
}

/* May the current role lock idempotency_keys as it likes? */
static bool
MayLockKeys(Oid keys)
{
	Oid			admin = get_role_oid("idempotency_admin", true);

	return superuser() || IdemOwnsRelation(keys, GetUserId()) ||
		(OidIsValid(admin) && has_privs_of_role(GetUserId(), admin));
}

/* Refuse the statement if one of its targets reaches idempotency_keys */
static void
CheckUtilityStmt(Node *stmt)
{
	Oid			extoid;
	List	   *targets;
	ListCell   *lc;

	if (!IsTransactionState())
		return;
	targets = GuardTargets(stmt);
	if (targets == NIL)
		return;
	extoid = get_extension_oid("idempotency", true);
	if (!OidIsValid(extoid))
		return;

	foreach(lc, targets)
	{
		GuardTarget *t = (GuardTarget *) lfirst(lc);
		ReachesContext cxt = {extoid, InvalidOid, NIL};
		Oid			relid;

		if (t->mode <= RowExclusiveLock)
			continue;
		relid = RangeVarGetRelid(t->rv, NoLock, true);
		if (!OidIsValid(relid) || !RelationReaches(relid, t->views, &cxt) ||
			MayLockKeys(cxt.keys))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to lock %s in %s mode",
						get_rel_name(cxt.keys), lock_mode_names[t->mode]),
				 relid != cxt.keys ?
				 errdetail("\"%s\" is an index of idempotency_keys, a view that reads it, or a table its row level security policies read.",
						   t->rv->relname) :
				 errdetail("The statement is %s.", GetCommandTagName(CreateCommandTag(stmt))),
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
	CheckUtilityStmt(pstmt->utilityStmt);

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
