/*-------------------------------------------------------------------------
 *
 * store.c
 *	  Access to idempotency_keys: saved SPI plans, argument checks and the
 *	  list of claims made by this transaction.
 *
 * The table is reached only through SQL, never by heap or index calls on
 * its OID, so that the extension also works where idempotency_keys is a
 * shell over shards (Citus).  Each statement is prepared once per backend
 * and kept with SPI_keepplan; the plan cache replans it when the table
 * changes.  Statement texts name the extension's schema explicitly and
 * schema-qualify every operator and function, so they mean the same thing
 * whatever the caller's search_path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "commands/sequence.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/rls.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "access/detoast.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "idempotency.h"

/* One saved statement: its text (with %1$s for the schema) and arguments */
typedef struct IdemStmtDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[9];
} IdemStmtDef;

/* The table, schema-qualified (or, for expiry on Citus, one of its shards) */
#define KEYS	"%1$s"
#define EQ		" OPERATOR(pg_catalog.=) "
#define NE		" OPERATOR(pg_catalog.<>) "
#define LE		" OPERATOR(pg_catalog.<=) "
#define GT		" OPERATOR(pg_catalog.>) "
#define PLUS	" OPERATOR(pg_catalog.+) "
#define MINUS	" OPERATOR(pg_catalog.-) "
#define WHERE_KEY	" WHERE scope" EQ "$1 AND key" EQ "$2"

/*
 * "now + the retention this row keeps", where $n is now in Unix epoch
 * seconds: a processing row keeps expires_at = locked_until + retention.
 * Every function in it is IMMUTABLE, unlike timestamptz + interval (STABLE),
 * which Citus refuses over columns in an UPDATE; and it is exact to the
 * microsecond (float8 epoch seconds carry about 0.2 us until the year 2242,
 * and to_timestamp rounds to the microsecond).
 */
#define SHIFTED_EXPIRY(n) \
	"pg_catalog.to_timestamp(" n " OPERATOR(pg_catalog.+) pg_catalog.date_part('epoch'," \
	" expires_at" MINUS "locked_until))"

/*
 * "The row is processing", for statements that find one row by its key.
 * Written as "neither completed nor failed" (the same thing: the status
 * has three values) rather than status = 'processing' on purpose: on a
 * 0.2.0 schema the planner could prove the partial lease index's predicate
 * from that and, with statistics that show few processing rows, choose a
 * scan of that whole index over the primary key.  These statements can
 * only use the primary key (sql/plans.sql checks it).
 */
#define AND_PROCESSING	" AND status" NE "'completed' AND status" NE "'failed'"

/*
 * due_at, the key of the only other index, is when expiry next needs to
 * look at the row: at or before the lease end while processing, at or
 * before expires_at after.  Claims set it to the lease end.  Complete,
 * fail and resolve lower it only when the new expires_at comes first
 * (a retention shorter than what was left of the lease); otherwise they
 * write the same value, and an UPDATE that changes no indexed column is
 * HOT.  The worker moves it forward (IDEM_STMT_EXPIRE_REKEY).
 */
#define DUE_AT_NO_LATER_THAN(expr) \
	" due_at = LEAST(due_at, " expr ")"

static const IdemStmtDef stmt_defs[IDEM_NUM_STMTS] = {
	[IDEM_STMT_SELECT] = {
		"SELECT status, CASE WHEN status" EQ "'processing' THEN 0"
		" WHEN status" EQ "'completed' THEN 1 ELSE 2 END,"
		" request_hash, response_code, response, token, locked_until,"
		" recovery_point, retryable, expires_at"
		" FROM " KEYS WHERE_KEY,
		2, {TEXTOID, TEXTOID}
	},
	/*
	 * Every value is computed in C and passed as a parameter (no nextval(),
	 * no time arithmetic in SQL), so that on a distributed table Citus can
	 * route each statement to the key's shard.  $3 request hash, $4 now,
	 * $5 lease end, $6 expires_at, $7 token.
	 */
	[IDEM_STMT_INSERT] = {
		"INSERT INTO " KEYS " (scope, key, status, token, locked_until,"
		" created_at, updated_at, expires_at, request_hash, due_at)"
		" VALUES ($1, $2, 'processing', $7, $5, $4, $4, $6, $3, $5)"
		" ON CONFLICT (scope, key) DO NOTHING RETURNING token, status",
		7, {TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}
	},
	/*
	 * Take over a failed-retryable key, or a processing one whose lease ran
	 * out ($7: stale policy is reclaim).  $3 is the token seen, so a claim
	 * that changed the row in between makes this a no-op.  $5 lease end,
	 * $6 expires_at, $8 the new token.
	 */
	[IDEM_STMT_TAKEOVER] = {
		"UPDATE " KEYS " SET status = 'processing', token = $8,"
		" locked_until = $5, expires_at = $6, due_at = $5,"
		" retryable = true, response_code = NULL, response = NULL, updated_at = $4"
		WHERE_KEY " AND token" EQ "$3 AND expires_at" GT "$4"
		" AND ((status" EQ "'failed' AND retryable)"
		" OR ($7 AND status" EQ "'processing' AND locked_until" LE "$4))"
		" RETURNING token, status, recovery_point",
		8, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, INT8OID}
	},
	/*
	 * Start afresh on a row past expires_at ($8: may replace processing);
	 * $7 the token seen, $9 the new token.
	 */
	[IDEM_STMT_RENEW] = {
		"UPDATE " KEYS " SET status = 'processing', token = $9,"
		" locked_until = $5, expires_at = $6, due_at = $5,"
		" created_at = $4, updated_at = $4, request_hash = $3, retryable = true,"
		" response_code = NULL, response = NULL, recovery_point = NULL"
		WHERE_KEY " AND token" EQ "$7 AND expires_at" LE "$4"
		" AND ($8 OR status" NE "'processing')"
		" RETURNING token, status",
		9, {TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, BOOLOID, INT8OID}
	},
	/*
	 * Record results.  A processing row keeps expires_at = locked_until +
	 * retention, so the retention its claim asked for carries over here.
	 * The new expires_at is written twice: SET expressions see the old row.
	 */
	[IDEM_STMT_COMPLETE] = {
		"UPDATE " KEYS " SET status = 'completed', response_code = $5, response = $6,"
		" expires_at = " SHIFTED_EXPIRY("$7") ","
		DUE_AT_NO_LATER_THAN(SHIFTED_EXPIRY("$7")) ","
		" locked_until = NULL, updated_at = $4"
		WHERE_KEY " AND token" EQ "$3" AND_PROCESSING
		" RETURNING status",
		7, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INT4OID, JSONBOID, FLOAT8OID}
	},
	[IDEM_STMT_FAIL] = {
		"UPDATE " KEYS " SET status = 'failed', retryable = $7, response_code = $5, response = $6,"
		" expires_at = " SHIFTED_EXPIRY("$8") ","
		DUE_AT_NO_LATER_THAN(SHIFTED_EXPIRY("$8")) ","
		" locked_until = NULL, updated_at = $4"
		WHERE_KEY " AND token" EQ "$3" AND_PROCESSING,
		8, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INT4OID, JSONBOID, BOOLOID, FLOAT8OID}
	},
	/* $5 the new lease end, $6 the same in Unix epoch seconds */
	[IDEM_STMT_HEARTBEAT] = {
		"UPDATE " KEYS " SET locked_until = $5,"
		" expires_at = " SHIFTED_EXPIRY("$6") ","
		" updated_at = $4"
		WHERE_KEY " AND token" EQ "$3" AND_PROCESSING
		" RETURNING locked_until",
		6, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, FLOAT8OID}
	},
	[IDEM_STMT_RELEASE] = {
		"DELETE FROM " KEYS WHERE_KEY " AND token" EQ "$3" AND_PROCESSING,
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	[IDEM_STMT_CHECKPOINT] = {
		"UPDATE " KEYS " SET recovery_point = $5, updated_at = $4"
		WHERE_KEY " AND token" EQ "$3" AND_PROCESSING,
		5, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TEXTOID}
	},
	/* Operator settles a processing key; a new token fences the old holder */
	/* $6 expires_at, $7 the new token */
	[IDEM_STMT_RESOLVE_FAIL] = {
		"UPDATE " KEYS " SET status = 'failed', retryable = false, token = $7,"
		" response_code = $4, response = $5, locked_until = NULL,"
		" updated_at = $3, expires_at = $6," DUE_AT_NO_LATER_THAN("$6")
		WHERE_KEY AND_PROCESSING,
		7, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID, JSONBOID, TIMESTAMPTZOID, INT8OID}
	},
	[IDEM_STMT_RESOLVE_RELEASE] = {
		"DELETE FROM " KEYS WHERE_KEY AND_PROCESSING,
		2, {TEXTOID, TEXTOID}
	},
	[IDEM_STMT_LOOKUP] = {
		"SELECT * FROM " KEYS WHERE_KEY,
		2, {TEXTOID, TEXTOID}
	},
	/*
	 * Expiry, one bounded batch at a time, each statement an index range
	 * scan of due_at <= now ($1).  SKIP LOCKED: never wait behind a claim,
	 * never touch a row a live transaction is using.
	 */
	[IDEM_STMT_EXPIRE_STALE] = {
		"UPDATE " KEYS " AS k SET status = 'failed', retryable = true,"
		" locked_until = NULL, updated_at = $1, due_at = k.expires_at"
		" FROM (SELECT scope, key FROM " KEYS
		" WHERE due_at" LE "$1 AND status" EQ "'processing' AND locked_until" LE "$1"
		" ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS due"
		" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	/* $3: processing rows past expires_at go too (stale policy is reclaim) */
	[IDEM_STMT_EXPIRE_DELETE] = {
		"DELETE FROM " KEYS " AS k USING (SELECT scope, key FROM " KEYS
		" WHERE due_at" LE "$1 AND expires_at" LE "$1 AND ($3 OR status" NE "'processing')"
		" ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS due"
		" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key",
		3, {TIMESTAMPTZOID, INT8OID, BOOLOID}
	},
	/*
	 * Rows due that need nothing yet get their next due time: a claim's
	 * lease end when it was extended, expires_at once it is completed or
	 * failed (a key completed by idem_complete is due at its lease's end
	 * first, so that complete could leave due_at as it was).  A stale claim
	 * held under stale_policy = hold stays due, for when the policy changes.
	 */
	[IDEM_STMT_EXPIRE_REKEY] = {
		"UPDATE " KEYS " AS k SET due_at = CASE WHEN k.status" EQ "'processing'"
		" THEN LEAST(k.locked_until, k.expires_at) ELSE k.expires_at END"
		" FROM (SELECT scope, key FROM " KEYS
		" WHERE due_at" LE "$1 AND expires_at" GT "$1"
		" AND (status" NE "'processing' OR locked_until" GT "$1)"
		" ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS due"
		" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	/*
	 * The key's lock, taken before a claim writes the key's row, held to the
	 * end of the transaction: a transaction-level advisory lock on a 64-bit
	 * hash of (scope, key) ($3).  wait => false only tries it.  Read through
	 * the key's row (count(*) always yields one row) so that, on a
	 * distributed table, the statement runs where the row lives.
	 */
	[IDEM_STMT_LOCK_KEY] = {
		"SELECT pg_catalog.pg_advisory_xact_lock($3), pg_catalog.count(*)"
		" FROM " KEYS WHERE_KEY,
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	[IDEM_STMT_TRY_LOCK_KEY] = {
		"SELECT pg_catalog.pg_try_advisory_xact_lock($3), pg_catalog.count(*)"
		" FROM " KEYS WHERE_KEY,
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	/*
	 * wait => false in a transaction that holds CLAIM_MAX_KEY_LOCKS already:
	 * is the key's lock free?  Asked with a session-level try, released at
	 * once (it shares the lock space with the transaction-level locks).
	 */
	[IDEM_STMT_PROBE_LOCK_KEY] = {
		"SELECT CASE WHEN pg_catalog.pg_try_advisory_lock($3)"
		" THEN pg_catalog.pg_advisory_unlock($3) ELSE false END, pg_catalog.count(*)"
		" FROM " KEYS WHERE_KEY,
		3, {TEXTOID, TEXTOID, INT8OID}
	},
	/* wait => false, before updating a row: lock it, or learn who holds it */
	[IDEM_STMT_TRY_LOCK_ROW] = {
		"SELECT token FROM " KEYS WHERE_KEY " FOR NO KEY UPDATE SKIP LOCKED",
		2, {TEXTOID, TEXTOID}
	},
	/*
	 * idem_execute's new key: the key row written once, completed, after
	 * the caller's statement ran, in a subtransaction (execute.c).  A plain
	 * INSERT: a key claimed meanwhile makes it wait for that claim and then
	 * fail with unique_violation, which execute.c handles; no ON CONFLICT,
	 * whose speculative insertion costs a WAL record more.  $3 request
	 * hash, $4 now, $5 expires_at, $6 response code, $7 response, $8 token.
	 */
	[IDEM_STMT_INSERT_COMPLETED] = {
		"INSERT INTO " KEYS " (scope, key, status, token, created_at, updated_at,"
		" expires_at, request_hash, response_code, response, due_at)"
		" VALUES ($1, $2, 'completed', $8, $4, $4, $5, $3, $6, $7, $5)"
		" RETURNING token, status",
		8, {TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, JSONBOID, INT8OID}
	},
};

/*
 * The statements that differ on a table of schema 0.1.0 / 0.2.0 (no due_at
 * column, the expires_at and partial lease indexes): the library serves
 * such a database between the package's upgrade and ALTER EXTENSION
 * idempotency UPDATE.  Expiry's re-keying has no counterpart there.
 */
static const IdemStmtDef stmt_defs_v02[IDEM_NUM_STMTS] = {
	[IDEM_STMT_INSERT] = {
		"INSERT INTO " KEYS " (scope, key, status, token, locked_until,"
		" created_at, updated_at, expires_at, request_hash)"
		" VALUES ($1, $2, 'processing', $7, $5, $4, $4, $6, $3)"
		" ON CONFLICT (scope, key) DO NOTHING RETURNING token, status",
		7, {TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}
	},
	[IDEM_STMT_TAKEOVER] = {
		"UPDATE " KEYS " SET status = 'processing', token = $8,"
		" locked_until = $5, expires_at = $6,"
		" retryable = true, response_code = NULL, response = NULL, updated_at = $4"
		WHERE_KEY " AND token" EQ "$3 AND expires_at" GT "$4"
		" AND ((status" EQ "'failed' AND retryable)"
		" OR ($7 AND status" EQ "'processing' AND locked_until" LE "$4))"
		" RETURNING token, status, recovery_point",
		8, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, INT8OID}
	},
	[IDEM_STMT_RENEW] = {
		"UPDATE " KEYS " SET status = 'processing', token = $9,"
		" locked_until = $5, expires_at = $6,"
		" created_at = $4, updated_at = $4, request_hash = $3, retryable = true,"
		" response_code = NULL, response = NULL, recovery_point = NULL"
		WHERE_KEY " AND token" EQ "$7 AND expires_at" LE "$4"
		" AND ($8 OR status" NE "'processing')"
		" RETURNING token, status",
		9, {TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, BOOLOID, INT8OID}
	},
	[IDEM_STMT_COMPLETE] = {
		"UPDATE " KEYS " SET status = 'completed', response_code = $5, response = $6,"
		" expires_at = " SHIFTED_EXPIRY("$7") ","
		" locked_until = NULL, updated_at = $4"
		WHERE_KEY " AND token" EQ "$3" AND_PROCESSING
		" RETURNING status",
		7, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INT4OID, JSONBOID, FLOAT8OID}
	},
	[IDEM_STMT_FAIL] = {
		"UPDATE " KEYS " SET status = 'failed', retryable = $7, response_code = $5, response = $6,"
		" expires_at = " SHIFTED_EXPIRY("$8") ","
		" locked_until = NULL, updated_at = $4"
		WHERE_KEY " AND token" EQ "$3" AND_PROCESSING,
		8, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, INT4OID, JSONBOID, BOOLOID, FLOAT8OID}
	},
	[IDEM_STMT_RESOLVE_FAIL] = {
		"UPDATE " KEYS " SET status = 'failed', retryable = false, token = $7,"
		" response_code = $4, response = $5, locked_until = NULL,"
		" updated_at = $3, expires_at = $6"
		WHERE_KEY AND_PROCESSING,
		7, {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID, JSONBOID, TIMESTAMPTZOID, INT8OID}
	},
	[IDEM_STMT_EXPIRE_STALE] = {
		"UPDATE " KEYS " AS k SET status = 'failed', retryable = true,"
		" locked_until = NULL, updated_at = $1"
		" FROM (SELECT scope, key FROM " KEYS
		" WHERE status" EQ "'processing' AND locked_until" LE "$1"
		" ORDER BY locked_until LIMIT $2 FOR UPDATE SKIP LOCKED) AS due"
		" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key",
		2, {TIMESTAMPTZOID, INT8OID}
	},
	[IDEM_STMT_EXPIRE_DELETE] = {
		"DELETE FROM " KEYS " AS k USING (SELECT scope, key FROM " KEYS
		" WHERE expires_at" LE "$1 AND ($3 OR status" NE "'processing')"
		" ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS due"
		" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key",
		3, {TIMESTAMPTZOID, INT8OID, BOOLOID}
	},
	[IDEM_STMT_INSERT_COMPLETED] = {
		"INSERT INTO " KEYS " (scope, key, status, token, created_at, updated_at,"
		" expires_at, request_hash, response_code, response)"
		" VALUES ($1, $2, 'completed', $8, $4, $4, $5, $3, $6, $7)"
		" RETURNING token, status",
		8, {TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, JSONBOID, INT8OID}
	},
};

/* Saved plans, valid for the schema they were prepared for */
static Oid	plans_nspid = InvalidOid;
static SPIPlanPtr plans[IDEM_NUM_STMTS];
static Oid	keys_relid = InvalidOid;

/*
 * Has the table the due_at column of 0.3.0?  Read again after a relcache
 * invalidation of the table (ALTER EXTENSION ... UPDATE changes it), and
 * then the saved plans are made again from the other texts if it changed.
 */
static bool keys_shape_known = false;
static bool keys_have_due_at = true;
static bool keys_shape_callback = false;

static void
KeysShapeInvalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == keys_relid)
		keys_shape_known = false;
}

/* The definition of a statement for the table's schema version */
static const IdemStmtDef *
StmtDef(IdemStmt stmt)
{
	if (!keys_have_due_at && stmt_defs_v02[stmt].sql != NULL)
		return &stmt_defs_v02[stmt];
	return &stmt_defs[stmt];
}

/* Forget every saved plan */
static void
FreePlans(void)
{
	for (int i = 0; i < IDEM_NUM_STMTS; i++)
	{
		if (plans[i] != NULL)
			SPI_freeplan(plans[i]);
		plans[i] = NULL;
	}
}

/*
 * Does idempotency_keys in schema nspid have due_at (schema 0.3.0 and
 * later)?  When this changes, the saved plans are made again.
 */
bool
IdemKeysHaveDueAt(Oid nspid)
{
	Oid			relid = IdemKeysRelid(nspid);

	if (!keys_shape_known)
	{
		bool		has = get_attnum(relid, "due_at") != InvalidAttrNumber;

		if (!keys_shape_callback)
		{
			CacheRegisterRelcacheCallback(KeysShapeInvalidate, (Datum) 0);
			keys_shape_callback = true;
		}
		if (has != keys_have_due_at)
			FreePlans();
		keys_have_due_at = has;
		keys_shape_known = true;
	}
	return keys_have_due_at;
}

/* Claims this transaction made: what lets a NULL token through */
typedef struct TxnClaim
{
	text	   *scope;
	text	   *key;
	int64		token;
} TxnClaim;

static List *txn_claims = NIL;
static LocalTransactionId txn_claims_lxid = InvalidLocalTransactionId;

/*
 * The schema a function of ours lives in, which is the extension's schema.
 * Cached in fn_extra so the catalog is read once per call site.
 */
Oid
IdemNamespaceOf(FunctionCallInfo fcinfo)
{
	Oid		   *cached = (Oid *) fcinfo->flinfo->fn_extra;

	if (cached == NULL)
	{
		cached = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(Oid));
		*cached = get_func_namespace(fcinfo->flinfo->fn_oid);
		fcinfo->flinfo->fn_extra = cached;
	}
	return *cached;
}

/*
 * The saved plan of a statement for the extension in schema nspid,
 * preparing it on first use.  Must be called inside SPI_connect.
 */
SPIPlanPtr
IdemPlan(IdemStmt stmt, Oid nspid)
{
	if (plans_nspid != nspid)
	{
		/* first use, or the extension was re-created elsewhere */
		FreePlans();
		plans_nspid = nspid;
		keys_relid = InvalidOid;
		keys_shape_known = false;
	}
	(void) IdemKeysHaveDueAt(nspid);

	if (plans[stmt] == NULL)
	{
		const IdemStmtDef *def = StmtDef(stmt);
		char	   *nspname = get_namespace_name(nspid);
		char	   *sql;
		SPIPlanPtr	plan;

		if (nspname == NULL)
			elog(ERROR, "cache lookup failed for namespace %u", nspid);
		sql = psprintf(def->sql, psprintf("%s.idempotency_keys", quote_identifier(nspname)));

		plan = SPI_prepare(sql, def->nargs, (Oid *) def->argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		plans[stmt] = plan;
	}
	return plans[stmt];
}

/*
 * The OID of idempotency_keys in the extension's schema nspid, for
 * privilege checks; looked up each time the schema's plans are (re)made
 * and when the table was re-created.
 */
Oid
IdemKeysRelid(Oid nspid)
{
	if (plans_nspid != nspid || !OidIsValid(keys_relid) ||
		get_rel_relkind(keys_relid) == '\0')
	{
		keys_relid = get_relname_relid("idempotency_keys", nspid);
		if (!OidIsValid(keys_relid))
			elog(ERROR, "idempotency_keys is missing from the extension's schema");
	}
	return keys_relid;
}

/* Tokens: the node's group id above TOKEN_GROUP_SHIFT bits of its sequence */
#define TOKEN_GROUP_SHIFT	48
#define TOKEN_MAX_GROUP		INT64CONST(32767)

static Oid	token_seq_relid = InvalidOid;
static Oid	token_seq_nspid = InvalidOid;
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
 * coordinator), or 0 where Citus is not installed.  Read once per backend;
 * Citus invalidates the table's relcache entry when the group changes.
 * Must be called inside SPI.
 */
static int64
NodeGroup(void)
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
		if (node_group < 0 || node_group > TOKEN_MAX_GROUP)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("Citus group id %lld is out of the range fencing tokens can hold",
							(long long) node_group),
					 errdetail("Tokens keep the group id in 15 bits.")));
	}
	return node_group;
}

/*
 * A new fencing token: this node's group id in the high bits, the next
 * value of the extension's sequence on this node below.  Unique across a
 * Citus cluster by construction (each node draws from its own sequence, as
 * Citus does for sequences on workers), larger on one node, and on a server
 * without Citus simply the sequence's value, as before.  Computed here and
 * passed to the statements as a parameter: nextval() in an UPDATE cannot
 * be routed to a shard.  Must be called inside SPI.
 */
int64
IdemNextToken(Oid nspid)
{
	int64		n;

	if (token_seq_nspid != nspid || !OidIsValid(token_seq_relid) ||
		get_rel_relkind(token_seq_relid) != RELKIND_SEQUENCE)
	{
		token_seq_relid = get_relname_relid("idempotency_token_seq", nspid);
		token_seq_nspid = nspid;
		if (!OidIsValid(token_seq_relid))
			elog(ERROR, "idempotency_token_seq is missing from the extension's schema");
	}
	n = nextval_internal(token_seq_relid, true);
	if (n <= 0 || n >= (INT64CONST(1) << TOKEN_GROUP_SHIFT))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("idempotency_token_seq is exhausted on this node"),
				 errdetail("Tokens keep the sequence's value in %d bits; it is %lld.",
						   TOKEN_GROUP_SHIFT, (long long) n)));
	return (NodeGroup() << TOKEN_GROUP_SHIFT) | n;
}

/* t + iv, as timestamptz + interval computes it */
TimestampTz
IdemTimePlus(TimestampTz t, Interval *iv)
{
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(t),
												   IntervalPGetDatum(iv)));
}

/* t in seconds since the Unix epoch, as SHIFTED_EXPIRY takes it */
double
IdemEpochSeconds(TimestampTz t)
{
	return (double) t / USECS_PER_SEC +
		(double) ((POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY);
}

/* Does row level security apply to the current role on idempotency_keys? */
bool
IdemRlsApplies(Oid nspid)
{
	return check_enable_rls(IdemKeysRelid(nspid), InvalidOid, true) == RLS_ENABLED;
}

/*
 * Run a saved statement; returns SPI_processed.  nulls is in SPI's
 * convention (' ' not null, 'n' null) or NULL for no nulls.
 */
int
IdemExecute(IdemStmt stmt, Oid nspid, Datum *values, const char *nulls,
			bool read_only, long count)
{
	int			rc;

	rc = SPI_execute_plan(IdemPlan(stmt, nspid), values, nulls, read_only, count);
	if (rc < 0)
		elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/*
 * Run a statement on another relation of the same shape as the table (a
 * Citus shard of it, for expiry), named schema-qualified and quoted; not
 * saved.  Returns SPI_processed.
 */
int
IdemExecuteOn(IdemStmt stmt, const char *relation, Datum *values,
			  const char *nulls)
{
	const IdemStmtDef *def = StmtDef(stmt);
	int			rc;

	rc = SPI_execute_with_args(psprintf(def->sql, relation), def->nargs,
							   (Oid *) def->argtypes, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/*
 * Copy the first row of an IDEM_STMT_SELECT result into row, allocating
 * in mcxt.  Sets row->found to false when there is no row.
 */
void
IdemReadRow(IdemRow *row, MemoryContext mcxt)
{
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	MemoryContext old;

	memset(row, 0, sizeof(IdemRow));
	if (SPI_processed == 0)
		return;

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	old = MemoryContextSwitchTo(mcxt);

	row->found = true;
	row->status = SPI_getbinval(tup, desc, 1, &isnull);
	row->status_code = (IdemStatus) DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
	d = SPI_getbinval(tup, desc, 3, &isnull);
	row->request_hash = isnull ? NULL : DatumGetByteaPCopy(d);
	d = SPI_getbinval(tup, desc, 4, &isnull);
	row->response_code_null = isnull;
	row->response_code = isnull ? 0 : DatumGetInt32(d);
	d = SPI_getbinval(tup, desc, 5, &isnull);
	row->response = isnull ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
	row->token = DatumGetInt64(SPI_getbinval(tup, desc, 6, &isnull));
	d = SPI_getbinval(tup, desc, 7, &isnull);
	row->locked_until_null = isnull;
	row->locked_until = isnull ? 0 : DatumGetTimestampTz(d);
	d = SPI_getbinval(tup, desc, 8, &isnull);
	row->recovery_point = isnull ? NULL : DatumGetTextPCopy(d);
	row->retryable = DatumGetBool(SPI_getbinval(tup, desc, 9, &isnull));
	row->expires_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 10, &isnull));

	MemoryContextSwitchTo(old);
}

/*
 * Reject an empty, over-long or unprintable key or scope.  NULLs are
 * rejected by the callers, which know the argument's name.  An empty
 * scope is the default scope, so only keys must be non-empty.
 */
void
IdemValidateKey(text *value, const char *what)
{
	int			len = VARSIZE_ANY_EXHDR(value);
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(value);
	bool		is_key = (strcmp(what, "key") == 0);

	if (is_key && len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idempotency key must not be empty")));
	if (len > idem_max_key_length)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idempotency %s is too long", what),
				 errdetail("The %s is %d bytes; idempotency.max_key_length is %d.",
						   what, len, idem_max_key_length)));
	for (int i = 0; i < len; i++)
	{
		if (p[i] < 0x20 || p[i] == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("idempotency %s must not contain control characters", what),
					 errdetail("Byte %d of the %s is 0x%02x.", i + 1, what, p[i])));
	}
}

/*
 * Read and check the key and scope arguments of a call: not NULL, and
 * valid (IdemValidateKey).
 */
void
IdemGetKeyArgs(FunctionCallInfo fcinfo, int keyarg, int scopearg,
			   text **key, text **scope)
{
	if (PG_ARGISNULL(keyarg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("idempotency key must not be null")));
	*key = PG_GETARG_TEXT_PP(keyarg);
	if (PG_ARGISNULL(scopearg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("idempotency scope must not be null"),
				 errdetail("Key \"%s\".", IdemKeyForMessage(*key)),
				 errhint("The default scope is the empty string.")));
	*scope = PG_GETARG_TEXT_PP(scopearg);
	IdemValidateKey(*key, "key");
	IdemValidateKey(*scope, "scope");
}

/*
 * A key or scope as a C string for error messages.  Validated keys hold no
 * control characters, so they print as they are.
 */
char *
IdemKeyForMessage(text *value)
{
	return text_to_cstring(value);
}

/*
 * Remember that this transaction claimed (scope, key) with token, so that
 * later calls in the same transaction may leave the token out.
 */
void
IdemRememberClaim(text *scope, text *key, int64 token)
{
	MemoryContext old;
	TxnClaim  *claim;

	if (txn_claims_lxid != IdemCurrentLxid())
	{
		/* the list of an earlier transaction went with its memory */
		txn_claims = NIL;
		txn_claims_lxid = IdemCurrentLxid();
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	claim = palloc(sizeof(TxnClaim));
	claim->scope = DatumGetTextPCopy(PointerGetDatum(scope));
	claim->key = DatumGetTextPCopy(PointerGetDatum(key));
	claim->token = token;
	txn_claims = lappend(txn_claims, claim);
	MemoryContextSwitchTo(old);
}

/* Same text value? */
static bool
TextEqual(text *a, text *b)
{
	Size		len = VARSIZE_ANY_EXHDR(a);

	return len == (Size) VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), len) == 0;
}

/*
 * The token of this transaction's latest claim of (scope, key), if any.
 */
bool
IdemRecallClaim(text *scope, text *key, int64 *token)
{
	if (txn_claims_lxid != IdemCurrentLxid())
		return false;

	/* newest first: a key claimed again in this transaction has a new token */
	for (int i = list_length(txn_claims) - 1; i >= 0; i--)
	{
		TxnClaim  *claim = (TxnClaim *) list_nth(txn_claims, i);

		if (TextEqual(claim->key, key) && TextEqual(claim->scope, scope))
		{
			*token = claim->token;
			return true;
		}
	}
	return false;
}

/* An interval of so many seconds */
Interval *
IdemSecondsInterval(int seconds)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = (TimeOffset) seconds * USECS_PER_SEC;
	return iv;
}

/*
 * errdetail() naming a key and its scope, for use inside ereport().
 */
int
IdemErrdetailKey(text *key, text *scope)
{
	return errdetail("Key \"%s\" in scope \"%s\".",
					 IdemKeyForMessage(key), IdemKeyForMessage(scope));
}

/*
 * The longest text form of a stored response.  pg_dump (COPY) writes each
 * row in one piece of at most 1 GB, and jsonb's text form can be far
 * longer than the jsonb: a control character is 1 byte there and 6
 * ("\u0001") in text, a numeric of 10 bytes can print 131,072 digits.
 */
#define IDEM_MAX_RESPONSE_TEXT	(256 * 1024 * 1024)

/* Below this many bytes (uncompressed) a jsonb's text is surely short enough */
#define IDEM_RESPONSE_CHECK_BYTES	8192

/* At least as many bytes as jsonb_out writes for a scalar */
static Size
ScalarTextBound(JsonbValue *v)
{
	Size		n = 0;

	switch (v->type)
	{
		case jbvString:
			n = 2;
			for (int i = 0; i < v->val.string.len; i++)
			{
				unsigned char c = (unsigned char) v->val.string.val[i];

				n += c < 0x20 ? 6 : (c == '"' || c == '\\') ? 2 : 1;
			}
			return n;
		case jbvNumeric:
			{
				char	   *str = DatumGetCString(DirectFunctionCall1(numeric_out,
																	  NumericGetDatum(v->val.numeric)));

				n = strlen(str);
				pfree(str);
				return n;
			}
		case jbvBool:
			return 5;
		default:
			return 4;			/* null */
	}
}

/*
 * Refuse a response whose text form would be longer than
 * IDEM_MAX_RESPONSE_TEXT, counted without writing it (and without counting
 * further than that): a row pg_dump cannot write would break every
 * tenant's backup.
 */
void
IdemCheckResponse(Datum response, text *key, text *scope)
{
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	Size		len = 0;

	if (toast_raw_datum_size(response) <= IDEM_RESPONSE_CHECK_BYTES)
		return;
	jb = DatumGetJsonbP(response);
	it = JsonbIteratorInit(&jb->root);
	while (len <= IDEM_MAX_RESPONSE_TEXT &&
		   (tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		len += 2;				/* brackets, ", ", ": " */
		if (tok == WJB_KEY || tok == WJB_VALUE || tok == WJB_ELEM)
			len += ScalarTextBound(&v);
	}
	if (len > IDEM_MAX_RESPONSE_TEXT)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("response is too large to store"),
				 errdetail("The response for key \"%s\" in scope \"%s\" is longer than %d MB as text; pg_dump writes each row in one piece of at most 1 GB.",
						   IdemKeyForMessage(key), IdemKeyForMessage(scope),
						   IDEM_MAX_RESPONSE_TEXT / (1024 * 1024)),
				 errhint("Store a reference to the body, or a digest of it, instead.")));
}

/* The longest lease or retention: a century, far inside timestamptz's range */
#define IDEM_MAX_INTERVAL_DAYS	36525

/*
 * Reject a lease or retention that does not move now forward, or moves it
 * past a century.  It is checked as now + interval, the way it is used, so
 * that months count as the calendar counts them: '-1 year 360 days 1 sec'
 * compares above zero (a month is 30 days there) but moves now backwards.
 * Each component is bounded first, so that the sum cannot overflow.
 */
void
IdemCheckInterval(Interval *iv, const char *what, TimestampTz now,
				  text *key, text *scope)
{
	const int64 max_usecs = (int64) IDEM_MAX_INTERVAL_DAYS * USECS_PER_DAY;
	bool		too_long;
	TimestampTz end = 0;

	too_long = Abs((int64) iv->month) > IDEM_MAX_INTERVAL_DAYS / 28 ||
		Abs((int64) iv->day) > IDEM_MAX_INTERVAL_DAYS ||
		iv->time > max_usecs || iv->time < -max_usecs;
	if (!too_long)
	{
		end = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(now),
													  IntervalPGetDatum(iv)));
		too_long = end - now > max_usecs;
	}
	if (too_long)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", what),
				 errdetail("The %s given for key \"%s\" in scope \"%s\" is %s; the longest is 100 years.",
						   what, IdemKeyForMessage(key), IdemKeyForMessage(scope),
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(iv))))));
	if (end <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a positive interval", what),
				 errdetail("The %s given for key \"%s\" in scope \"%s\" is %s.", what,
						   IdemKeyForMessage(key), IdemKeyForMessage(scope),
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(iv)))),
				 errhint("It is added to the current time, months as the calendar counts them.")));
}
