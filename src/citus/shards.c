/*-------------------------------------------------------------------------
 *
 * shards.c
 *	  On Citus: the shard of a key's scope, whether this node holds it (and
 *	  so the key's lock), and holding it where it is until the transaction
 *	  ends; how the statements we keep are planned; this node's group; what
 *	  expiry works on.
 *
 * A claim takes the key's lock on the node that holds the key's shard
 * (claim.c), through a statement routed to the key's row, so that every
 * caller of a key, wherever it runs, meets the same lock.  When the call
 * runs on that node itself (a call delegated by create_distributed_function,
 * or made on the worker), the lock can be taken here without a statement:
 * one statement fewer through Citus's planner for every new key.  Every
 * statement on the key's row itself goes through Citus, which runs it on
 * a shard of this node with its own local execution: Citus exports nothing
 * on purpose that would let another module run a statement on a shard and
 * record it as Citus records its own (so that the transaction's later
 * statements see it, and it commits in two phases with another node's
 * writes).
 *
 * It reads Citus's catalogs once per backend (SQL, as the caller: Citus
 * grants them to PUBLIC) and keeps, for idempotency_keys hash-distributed
 * by scope, each shard's hash range and whether this node holds its only
 * placement.  The scope's hash is Citus's own: the distribution column
 * type's hash function (hashtext) under the column's collation.  Citus
 * invalidates the distributed table's relcache entry whenever its shards
 * or placements change (a move, a split, a rebalance), and that empties
 * the list here; it is read again under the latest snapshot.  A list read
 * just before a move commits is out of date until the invalidation comes
 * in (at the next lock this backend takes); the key's lock then misses a
 * caller on the other node, and what stays exact is what does not depend
 * on the lock: the primary key lets one claim of the key commit.
 *
 * Anything else (no Citus, the table not distributed, distributed by
 * another column, a reference or single-shard table) answers "not here",
 * and the claim takes the routed statement as before.
 *
 * Every statement on a key, here or through Citus, first holds the key's
 * shard with Citus's shard metadata lock until the transaction ends, once
 * per transaction (IdemCitusHoldKeyShard), so that a shard move waits for
 * the transaction.  The lock is taken through Citus's SQL-callable
 * lock_shard_metadata(integer, bigint[]), the function a shard move itself
 * calls on every node, found in pg_proc: from PostgreSQL 16 on Citus is
 * built with hidden symbols, and only its SQL-callable functions stay
 * exported.  Where Citus lacks that function, a statement on a key is
 * refused rather than run without the hold.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "storage/lmgr.h"
#include "storage/lockdefs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "compat.h"
#include "common.h"
#include "session.h"
#include "citus/citus.h"

/* One shard of idempotency_keys: its hash range, and whether it is here */
typedef struct KeyShard
{
	int32		min;
	int32		max;
	bool		local;
	int64		shardid;
	Oid			relid;			/* the shard's relation here, once looked up */
} KeyShard;

static KeyShard *key_shards = NULL;	/* in IdemCacheContext() */
static int	key_shards_count = 0;
static Oid	key_shards_relid = InvalidOid;	/* valid: the list is known */
static Oid	key_shards_watch = InvalidOid;	/* the table the list is of */
static uint32 key_shards_invals = 0;	/* invalidations of it seen */
static Oid	key_shards_collation = InvalidOid;
static bool key_shards_callback = false;

/*
 * idempotency_keys' shards: hash range, and whether this node holds the
 * shard's only placement (with more than one, as under a replication
 * factor above 1, Citus may run the routed statement on another); no row
 * unless the table is hash-distributed by scope.
 */
static const char *const key_shards_sql =
"SELECT s.shardminvalue::pg_catalog.int4, s.shardmaxvalue::pg_catalog.int4,"
" COALESCE((SELECT pg_catalog.bool_and(p.groupid OPERATOR(pg_catalog.=) g.groupid)"
"  FROM pg_catalog.pg_dist_placement p, pg_catalog.pg_dist_local_group g"
"  WHERE p.shardid OPERATOR(pg_catalog.=) s.shardid), false), s.shardid"
" FROM pg_catalog.pg_dist_shard s, pg_catalog.pg_dist_partition d"
" WHERE d.logicalrelid OPERATOR(pg_catalog.=) $1"
" AND s.logicalrelid OPERATOR(pg_catalog.=) $1"
" AND d.partmethod OPERATOR(pg_catalog.=) 'h'"
" AND pg_catalog.column_to_column_name(d.logicalrelid, d.partkey) OPERATOR(pg_catalog.=) 'scope'";

/* The table's relcache entry was invalidated: read the shards again */
static void
KeyShardsInvalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == key_shards_watch)
	{
		key_shards_relid = InvalidOid;
		key_shards_invals++;
	}
}

/*
 * Read the shard list of the table relid; inside SPI.  The list counts as
 * known only if no invalidation of the table came in while it was read.
 */
static void
ReadKeyShards(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	int32		typmod;
	Oid			typid;
	KeyShard   *shards;
	uint32		invals;

	if (!key_shards_callback)
	{
		CacheRegisterRelcacheCallback(KeyShardsInvalidate, (Datum) 0);
		key_shards_callback = true;
	}
	key_shards_watch = relid;
	invals = key_shards_invals;
	/*
	 * The latest snapshot, not the statement's: an invalidation from a move
	 * that committed after the statement's snapshot was taken must not be
	 * answered with the placements from before it (Citus reads its own
	 * metadata the same way).
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	if (SPI_execute_with_args(key_shards_sql, 1, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the shards of idempotency_keys");
	PopActiveSnapshot();

	shards = MemoryContextAllocZero(IdemCacheContext(),
									sizeof(KeyShard) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull[4];

		shards[i].min = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull[0]));
		shards[i].max = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull[1]));
		shards[i].local = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull[2]));
		shards[i].shardid = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull[3]));
		if (isnull[0] || isnull[1] || isnull[2] || isnull[3])
			shards[i].local = false;
	}
	get_atttypetypmodcoll(relid, get_attnum(relid, "scope"), &typid, &typmod,
						  &key_shards_collation);
	if (key_shards != NULL)
		pfree(key_shards);
	key_shards = shards;
	key_shards_count = (int) SPI_processed;
	key_shards_relid = (key_shards_invals == invals) ? relid : InvalidOid;
}

/*
 * The shard of scope in idempotency_keys (relid, IdemKeysRelid), or NULL
 * where Citus is not installed or the table is not hash-distributed by
 * scope.  Must be called inside SPI.
 */
static KeyShard *
ShardOf(Oid relid, text *scope)
{
	int32		hash;

	if (!IdemCitusPresent())
		return NULL;
	if (key_shards_relid != relid)
		ReadKeyShards(relid);
	if (key_shards_count == 0)
		return NULL;

	/* Citus's hash of the distribution column: its type's, under its collation */
	hash = DatumGetInt32(DirectFunctionCall1Coll(hashtext, key_shards_collation,
												 PointerGetDatum(scope)));
	for (int i = 0; i < key_shards_count; i++)
	{
		if (hash >= key_shards[i].min && hash <= key_shards[i].max)
			return &key_shards[i];
	}
	return NULL;
}

/*
 * Is the key's lock taken on this node (claim.c, keylock.c)?  Yes on a
 * server without Citus, where the table is not hash-distributed by scope
 * and where this node holds the shard of scope in idempotency_keys (relid,
 * IdemKeysRelid); otherwise the claim takes it through a statement routed
 * to the key's row.  Must be called inside SPI.
 */
bool
IdemCitusKeyLockHere(Oid relid, text *scope)
{
	KeyShard   *shard;

	if (!IdemCitusPresent())
		return true;
	shard = ShardOf(relid, scope);
	return shard != NULL && shard->local;
}

/*
 * Citus's lock_shard_metadata(integer, bigint[]), found in pg_proc once
 * per backend and again after any change to pg_proc (CREATE, ALTER or DROP
 * EXTENSION citus change it).
 */
static bool lock_fn_known = false;
static bool lock_fn_callback = false;
static FmgrInfo lock_fn;

static void
LockFnInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	lock_fn_known = false;
}

/* Find lock_shard_metadata, or refuse to go on without it */
static void
LockFnLookUp(void)
{
	Oid			argtypes[2] = {INT4OID, INT8ARRAYOID};
	Oid			fnoid;

	if (!lock_fn_callback)
	{
		CacheRegisterSyscacheCallback(PROCOID, LockFnInvalidate, (Datum) 0);
		lock_fn_callback = true;
	}
	fnoid = LookupFuncName(list_make2(makeString("pg_catalog"),
									  makeString("lock_shard_metadata")),
						   2, argtypes, true);
	if (!OidIsValid(fnoid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("Citus function lock_shard_metadata(integer, bigint[]) does not exist"),
				 errdetail("A statement on a key holds the key's shard with it until the transaction ends, so that a shard move waits for the transaction; without it a move could let a retry run the payment again."),
				 errhint("Use a Citus release that has it (13.2 or later).")));
	fmgr_info_cxt(fnoid, &lock_fn, IdemCacheContext());
	lock_fn_known = true;
}

/*
 * The shards this transaction holds (HoldShard), so that a
 * statement on a shard already held takes neither the lock nor the
 * invalidations again (each call of lock_shard_metadata also reads
 * pg_dist_shard for the shard's table and checks its owner).  Forgotten
 * when the transaction ends (commit, abort or prepare) and when any
 * subtransaction aborts, which releases the locks taken in it.
 */
#define HELD_SHARDS 8

static int	held_count = 0;
static int64 held_shards[HELD_SHARDS];
static bool held_callbacks = false;

static void
HeldShardsForgetXact(XactEvent event, void *arg)
{
	held_count = 0;
}

static void
HeldShardsForgetSubXact(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		held_count = 0;
}

static bool
ShardHeld(int64 shardid)
{
	for (int i = 0; i < held_count; i++)
	{
		if (held_shards[i] == shardid)
			return true;
	}
	return false;
}

static void
ShardHeldNow(int64 shardid)
{
	if (!held_callbacks)
	{
		RegisterXactCallback(HeldShardsForgetXact, NULL);
		RegisterSubXactCallback(HeldShardsForgetSubXact, NULL);
		held_callbacks = true;
	}
	if (held_count < HELD_SHARDS)
		held_shards[held_count++] = shardid;
}

/* The owner of relation relid */
static Oid
RelationOwner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Hold shard shardid of idempotency_keys (relid, IdemKeysRelid) where it
 * is until this transaction ends: Citus's shard metadata
 * lock (ShareLock), which every write through Citus takes and a shard move
 * or split takes on every node while it switches the shard's placement (a
 * move with block_writes from before its copy); then the invalidations of
 * a move that committed meanwhile are taken in, so the shard's placement
 * is read as it now stays.  Taken before the transaction's first statement
 * on the key's shard, it keeps every later one on the same placement:
 * Citus sends a transaction's statements on a shard over the connection
 * its first one used, also after a move switched the shard to another node
 * (on a worker the placement keeps its id), and a write would then go to
 * the shard left behind, to be dropped with it.
 *
 * lock_shard_metadata lets only the owner of the shard's table lock it (so
 * that no role blocks another's writes at will); the caller of a key
 * function may be any role with rights on the table, and the lock is the
 * one its own write through Citus takes, on a shard this function chose,
 * so it is taken as the table's owner, in a restricted security context.
 * Once per shard and transaction.
 */
static void
HoldShard(Oid relid, int64 shardid)
{
	Datum		elem = Int64GetDatum(shardid);
	ArrayType  *shards;
	Oid			owner;
	Oid			save_userid;
	int			save_sec;

	if (ShardHeld(shardid))
		return;
	if (!lock_fn_known)
		LockFnLookUp();
	owner = RelationOwner(relid);
	shards = construct_array(&elem, 1, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
							 TYPALIGN_DOUBLE);
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	PG_TRY();
	{
		FunctionCall2(&lock_fn, Int32GetDatum(ShareLock), PointerGetDatum(shards));
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec);
	}
	PG_END_TRY();
	pfree(shards);
	AcceptInvalidationMessages();
	ShardHeldNow(shardid);
}

/*
 * Before a statement on the key of scope in idempotency_keys (relid,
 * IdemKeysRelid, of the extension in schema nspid): hold the key's shard
 * where it is until the transaction ends (HoldShard), where the table is
 * hash-distributed by scope.  Returns whether this node holds the shard
 * (its only placement, whose relation is here: Citus names a shard
 * <table>_<shardid>, in the table's schema; looked up once per shard
 * list), so that the statement may be run with its scope inlined.
 *
 * Citus (13.2 and 14.0) plans a SELECT, UPDATE or DELETE whose
 * distribution column is compared with a constant straight on the local
 * shard (its local fast path); compared with a parameter, it plans the
 * statement for the table, and at each execution deparses it for the shard
 * and parses and plans that text again (its cache of such plans, for a
 * saved generic plan, never hits: see IdemCitusCustomPlansOnly).  Parsing
 * the statement's text once per call costs less.  An INSERT is planned the
 * second way whatever its values.  False, and nothing held, on a server
 * without Citus.  Must be called inside SPI.
 */
bool
IdemCitusHoldKeyShard(Oid nspid, Oid relid, text *scope)
{
	KeyShard   *shard = ShardOf(relid, scope);
	bool		here;

	if (shard == NULL)
		return false;
	if (shard->local && !OidIsValid(shard->relid))
		shard->relid = get_relname_relid(psprintf("idempotency_keys_" INT64_FORMAT,
												  shard->shardid), nspid);
	here = shard->local && OidIsValid(shard->relid);
	HoldShard(relid, shard->shardid);
	return here;
}

/*
 * Is Citus installed in this database (its pg_dist_local_group is there)?
 * Looked up again after any change to pg_class's names (CREATE and DROP
 * EXTENSION citus make one); asked several times a call, and on a server
 * without Citus the lookup was most of what the Citus paths cost.
 */
static int	citus_present = -1;	/* -1: not known */
static bool citus_present_callback = false;

static void
CitusPresentInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	citus_present = -1;
}

bool
IdemCitusPresent(void)
{
	if (citus_present < 0)
	{
		if (!citus_present_callback)
		{
			CacheRegisterSyscacheCallback(RELNAMENSP, CitusPresentInvalidate, (Datum) 0);
			citus_present_callback = true;
		}
		citus_present = OidIsValid(get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE));
	}
	return citus_present == 1;
}

/*
 * Are the statements the extension keeps (its own, and idem_execute's
 * caller's) to be planned afresh at every execution (store.c)?  Under
 * Citus, yes.  Citus 13.2 plans a generic plan's shard query again at each
 * execution on the node that holds the shard (its local plan cache looks
 * the task up in the generic plan, which has none) and adds every copy to
 * the generic plan's memory: a backend running our statements on a worker
 * grew by about 160 kB a call, without end (test/citus, citus/memory).  A
 * custom plan does that planning once per execution too, and frees it.
 */
bool
IdemCitusCustomPlansOnly(void)
{
	return IdemCitusPresent();
}

static int64 node_group = -1;	/* -1: to be read */
static Oid	node_group_relid = InvalidOid;
static bool node_group_callback = false;

/* pg_dist_local_group changed (or everything was invalidated): read again */
static void
NodeGroupInvalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == node_group_relid)
		node_group = -1;
}

/*
 * This node's Citus group id (pg_catalog.pg_dist_local_group: 0 on the
 * coordinator), or 0 where Citus is not installed; an ERROR past max (the
 * fencing tokens' room for it).  Read once per backend; Citus invalidates
 * the table's relcache entry when the group changes.  Must be called
 * inside SPI.
 */
int64
IdemCitusNodeGroup(int64 max)
{
	Oid			relid = get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE);

	if (relid != node_group_relid)
	{
		node_group_relid = relid;
		node_group = -1;
	}
	if (!OidIsValid(relid))
		return 0;
	if (node_group < 0)
	{
		bool		isnull;
		Datum		d;

		if (!node_group_callback)
		{
			CacheRegisterRelcacheCallback(NodeGroupInvalidate, (Datum) 0);
			node_group_callback = true;
		}
		if (SPI_execute("SELECT groupid FROM pg_catalog.pg_dist_local_group", true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read pg_catalog.pg_dist_local_group");
		d = SPI_processed == 1 ?
			SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull) : (Datum) 0;
		node_group = (SPI_processed == 1 && !isnull) ? DatumGetInt32(d) : 0;
		if (node_group < 0 || node_group > max)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("Citus group id %lld is out of the range fencing tokens can hold",
							(long long) node_group),
					 errdetail("Tokens keep the group id in 15 bits.")));
	}
	return node_group;
}

/*
 * This node's shards of idempotency_keys (the table relid, hash-distributed),
 * schema-qualified and quoted, as of the active snapshot.  Each node's worker
 * expires its own shards, with no connection to another node (which
 * idempotency_admin, a role that cannot log in, could not open): statements
 * over the whole distributed table with FOR UPDATE cannot run on Citus
 * anyway.  Called inside SPI.
 */
static List *
LocalShards(Oid nspid, Oid relid)
{
	Datum		arg = ObjectIdGetDatum(relid);
	List	   *shards = NIL;
	char	   *schema;
	char	   *relname;

	if (!OidIsValid(get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE)))
		return NIL;
	if (SPI_execute_with_args("SELECT s.shardid FROM pg_catalog.pg_dist_partition d"
							  " JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid OPERATOR(pg_catalog.=) d.logicalrelid"
							  " JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid"
							  " WHERE d.logicalrelid OPERATOR(pg_catalog.=) $1 AND d.partmethod OPERATOR(pg_catalog.=) 'h'"
							  " AND p.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group)"
							  " ORDER BY s.shardid",
							  1, (Oid[]) {OIDOID}, &arg, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read this node's shards of idempotency_keys");
	if (SPI_processed == 0)
		return NIL;
	schema = get_namespace_name(nspid);
	relname = get_rel_name(relid);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int64		shardid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 1, &isnull));

		shards = lappend(shards, makeRangeVar(schema, psprintf("%s_" INT64_FORMAT, relname, shardid), -1));
	}
	return shards;
}

/*
 * The tables in a publication of Citus's shard transfers by logical
 * replication (citus_shard_move_publication_..., citus_shard_split_
 * publication_...: the prefixes of 13.2.2 and 14.0.1), as of the active
 * snapshot; NIL when there is none, as almost always.  Called inside SPI.
 */
static List *
TransferPublished(void)
{
	List	   *relids = NIL;

	if (SPI_execute("SELECT r.prrelid FROM pg_catalog.pg_publication_rel r"
					" JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.prpubid"
					" WHERE p.pubname OPERATOR(pg_catalog.~) '^citus_shard_(move|split)_publication_'",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_publication_rel");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			relids = lappend_oid(relids, DatumGetObjectId(d));
	}
	return relids;
}

/*
 * Is idempotency_keys (relid) a Citus table, as of the active snapshot (so
 * that only shards hold rows)?  Only one hash-distributed will do: its
 * shards are expired on the node that holds them (LocalShards); a reference
 * table's or a single-shard table's rows would have to be written through
 * Citus, whose planner refuses the batch's FOR UPDATE SKIP LOCKED over a
 * Citus table, so such a table is refused rather than left unexpired.
 * Called inside SPI.
 */
static bool
KeysDistributed(Oid relid)
{
	Datum		arg = ObjectIdGetDatum(relid);
	bool		isnull;
	char		method;

	if (SPI_execute_with_args("SELECT partmethod FROM pg_catalog.pg_dist_partition"
							  " WHERE logicalrelid OPERATOR(pg_catalog.=) $1",
							  1, (Oid[]) {OIDOID}, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_dist_partition");
	if (SPI_processed == 0)
		return false;
	method = DatumGetChar(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull || method != 'h')
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot expire idempotency_keys: it is a Citus table that is not hash-distributed"),
				 errdetail("Expiry runs on each node's shards of the table distributed by scope."),
				 errhint("Distribute the table with idem_distribute(), or undistribute it.")));
	return true;
}

/*
 * What expiry works on in this transaction (of the extension in schema
 * nspid): the table itself (IDEM_EXPIRY_TABLE) where Citus is not
 * installed or has not made it a Citus table; this node's shards of it
 * (IDEM_EXPIRY_SHARDS, into *shards, quoted and schema-qualified; NIL where
 * this node holds none); or nothing this time (IDEM_EXPIRY_SKIP).
 *
 * With Citus installed the table may change under expiry: distributed
 * (create_distributed_table locks it in ExclusiveMode while it copies the
 * rows and adds the metadata on every node), its shards moved, split,
 * rebalanced and their old copies dropped.  A decision read from Citus's
 * catalogs in the transaction's snapshot can be out of date by the time the
 * batch's statement has its lock: a pass that saw the table plain waited
 * for the distribution and then ran its plain statement through Citus's
 * planner (SQLSTATE 0A000, FOR UPDATE over a distributed table; or 55P03
 * after lock_timeout).  So the lock comes first, the one the batch takes
 * anyway (ROW EXCLUSIVE, on the table and then on each shard): holding it,
 * no change that conflicts with it can be under way or commit before the
 * transaction ends, and taking it took in the invalidations of one that
 * committed before; then Citus's catalogs are read under the latest
 * snapshot, as Citus's planner reads them.  On a worker node a table not
 * distributed yet is also held in SHARE UPDATE EXCLUSIVE mode, the lock
 * under which Citus adds its metadata there (below).
 *
 * skip_locked (the background worker): a lock held by another transaction
 * is not waited for: the table locked gives IDEM_EXPIRY_SKIP, a shard
 * locked (a move or its cleanup under way) or gone is left out, each said
 * at DEBUG1, and the next pass tries again.  A lock that conflicts with
 * ROW EXCLUSIVE also blocks every claim's write there, so such a skip
 * cannot last unseen (SHARE UPDATE EXCLUSIVE is held by a vacuum or a
 * metadata change, which end).
 * Otherwise (idem_expire()) the locks are waited for, as any statement's,
 * and a shard dropped meanwhile is left out.  Either way a shard that a
 * shard transfer's publication holds is left out (below).  Called inside
 * SPI.
 */
IdemExpiryTarget
IdemCitusExpiryTargets(Oid nspid, Oid relid, bool skip_locked, List **shards)
{
	List	   *names;
	List	   *held = NIL;		/* the shards locked, and their oids */
	List	   *held_oids = NIL;
	List	   *publishing;
	ListCell   *lc;
	ListCell   *lo;
	bool		distributed;

	*shards = NIL;
	if (!OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)))
		return IDEM_EXPIRY_TABLE;

	if (!skip_locked)
		LockRelationOid(relid, RowExclusiveLock);
	else if (!ConditionalLockRelationOid(relid, RowExclusiveLock))
	{
		ereport(DEBUG1,
				(errmsg("idempotency: expiry skipped idempotency_keys in this pass: another transaction holds a lock on it"),
				 errdetail("A distribution or another change of the table is under way; the next pass tries again.")));
		return IDEM_EXPIRY_SKIP;
	}

	PushActiveSnapshot(GetLatestSnapshot());
	distributed = KeysDistributed(relid);
	PopActiveSnapshot();

	/*
	 * Not a Citus table yet.  On a worker node (group above 0), Citus adds
	 * the table's metadata under SHARE UPDATE EXCLUSIVE only ("to serialize
	 * all the metadata changes to this table", its internal
	 * add_partition_metadata in 13.2.2 and 14.0.1), which ROW EXCLUSIVE does
	 * not conflict with, and commits it with the coordinator's
	 * distribution: holding that lock too, no such change can commit before
	 * the batch's statement is planned, and the catalogs are read again
	 * under it.  Not on the coordinator, where the distribution's EXCLUSIVE
	 * lock is enough, and where a table kept local would otherwise be
	 * skipped whenever autovacuum works on it.
	 */
	if (!distributed && IdemCitusNodeGroup(PG_INT32_MAX) > 0)
	{
		if (!skip_locked)
			LockRelationOid(relid, ShareUpdateExclusiveLock);
		else if (!ConditionalLockRelationOid(relid, ShareUpdateExclusiveLock))
		{
			ereport(DEBUG1,
					(errmsg("idempotency: expiry skipped idempotency_keys in this pass: another transaction holds a lock on it"),
					 errdetail("A distribution, a vacuum or another change of the table is under way on this worker node; the next pass tries again.")));
			return IDEM_EXPIRY_SKIP;
		}
		PushActiveSnapshot(GetLatestSnapshot());
		distributed = KeysDistributed(relid);
		PopActiveSnapshot();
	}
	if (!distributed)
		return IDEM_EXPIRY_TABLE;
	PushActiveSnapshot(GetLatestSnapshot());
	names = LocalShards(nspid, relid);
	PopActiveSnapshot();

	/*
	 * Each shard's lock too, before the batch's statement names it.  A
	 * shard whose move committed after the placements were read is still
	 * here until Citus drops it: expiring its rows then changes a copy
	 * nobody reads any more.
	 */
	foreach(lc, names)
	{
		RangeVar   *rv = (RangeVar *) lfirst(lc);
		Oid			shard = RangeVarGetRelidExtended(rv, RowExclusiveLock,
													 RVR_MISSING_OK | (skip_locked ? RVR_SKIP_LOCKED : 0),
													 NULL, NULL);

		if (!OidIsValid(shard))
		{
			ereport(DEBUG1,
					(errmsg("idempotency: expiry skipped shard \"%s\" in this pass: it is locked by another transaction or gone",
							rv->relname),
					 errdetail("A shard move, split or the cleanup of a moved shard is under way; the next pass tries again.")));
			continue;
		}
		held = lappend(held, rv);
		held_oids = lappend_oid(held_oids, shard);
	}
	if (held == NIL)
		return IDEM_EXPIRY_SHARDS;

	/*
	 * Then the shards a transfer by logical replication publishes (a move or
	 * split under way, or its publication not yet dropped): left out too.
	 * Citus drops the publication when the transfer ends, and a write to one
	 * of its tables while the drop commits can fail in PostgreSQL's own
	 * lookup of the table's publications (XX000 "cache lookup failed for
	 * publication", seen once on 15 during a rebalance); the shard's lock
	 * does not conflict with the drop.  Read under the latest snapshot,
	 * after the locks; the invalidations of a drop it no longer sees are
	 * then taken in, so that the batch's statement builds the shard's
	 * publications from the catalogs as they are now.
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	publishing = TransferPublished();
	PopActiveSnapshot();
	AcceptInvalidationMessages();
	forboth(lc, held, lo, held_oids)
	{
		RangeVar   *rv = (RangeVar *) lfirst(lc);

		if (list_member_oid(publishing, lfirst_oid(lo)))
		{
			ereport(DEBUG1,
					(errmsg("idempotency: expiry skipped shard \"%s\" in this pass: a shard transfer publishes it",
							rv->relname),
					 errdetail("A shard move or split by logical replication is under way, or its publication is not dropped yet; the next pass tries again.")));
			continue;
		}
		*shards = lappend(*shards, psprintf("%s.%s", quote_identifier(rv->schemaname),
											quote_identifier(rv->relname)));
	}
	return IDEM_EXPIRY_SHARDS;
}
