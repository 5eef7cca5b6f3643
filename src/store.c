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
 * whatever the caller's search_path.  They name their parameters (:token,
 * :lease_end, ...); callers pass values by those names (IdemArgs).
 *
 * On Citus, every statement on a key first holds the key's shard where it
 * is until the transaction ends (Citus's shard metadata lock, which a shard
 * move or split waits for), then goes through Citus, which runs it on a
 * shard of this node with its own local execution.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "commands/sequence.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "access/detoast.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "idempotency.h"

/*
 * The statements' parameters: each statement's text names them as :name,
 * numbered $1, $2, ... in order of first use when it is prepared.
 */
static const struct
{
	const char *name;
	Oid			type;
}			params[IDEM_NUM_PARAMS] = {
	[IDEM_PARAM_SCOPE] = {"scope", TEXTOID},
	[IDEM_PARAM_KEY] = {"key", TEXTOID},
	[IDEM_PARAM_REQUEST_HASH] = {"request_hash", BYTEAOID},
	[IDEM_PARAM_NOW] = {"now", TIMESTAMPTZOID},
	[IDEM_PARAM_NOW_EPOCH] = {"now_epoch", FLOAT8OID},
	[IDEM_PARAM_LEASE_END] = {"lease_end", TIMESTAMPTZOID},
	[IDEM_PARAM_LEASE_END_EPOCH] = {"lease_end_epoch", FLOAT8OID},
	[IDEM_PARAM_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID},
	[IDEM_PARAM_TOKEN] = {"token", INT8OID},
	[IDEM_PARAM_NEW_TOKEN] = {"new_token", INT8OID},
	[IDEM_PARAM_RESPONSE_CODE] = {"response_code", INT4OID},
	[IDEM_PARAM_RESPONSE] = {"response", JSONBOID},
	[IDEM_PARAM_RETRYABLE] = {"retryable", BOOLOID},
	[IDEM_PARAM_RECLAIM] = {"reclaim", BOOLOID},
	[IDEM_PARAM_RECOVERY_POINT] = {"recovery_point", TEXTOID},
	[IDEM_PARAM_BATCH_SIZE] = {"batch_size", INT8OID},
	[IDEM_PARAM_STAMPED] = {"stamped", TIMESTAMPTZOID},
	[IDEM_PARAM_SHIFT] = {"shift", FLOAT8OID},
};

/* Parameters one statement uses at most */
#define STMT_MAX_PARAMS 10

/* The table, schema-qualified (or, for expiry on Citus, one of its shards) */
#define KEYS	"%1$s"
/* The extension's schema, quoted (only in statements run on the table) */
#define NSP		"%2$s"
#define EQ		" OPERATOR(pg_catalog.=) "
#define NE		" OPERATOR(pg_catalog.<>) "
#define LE		" OPERATOR(pg_catalog.<=) "
#define GT		" OPERATOR(pg_catalog.>) "
#define WHERE_KEY	" WHERE scope" EQ ":scope AND key" EQ ":key"
#define AND_TOKEN	" AND token" EQ ":token"

/*
 * "now + the retention this row keeps", where epoch is now in Unix epoch
 * seconds: a processing row keeps expires_at = locked_until + retention.
 * Every function in it is IMMUTABLE, unlike timestamptz + interval (STABLE),
 * which Citus refuses over columns in an UPDATE; and it is exact to the
 * microsecond (float8 epoch seconds carry about 0.2 us until the year 2242,
 * and to_timestamp rounds to the microsecond).
 */
#define SHIFTED_EXPIRY(epoch) \
	"pg_catalog.to_timestamp(" epoch " OPERATOR(pg_catalog.+) pg_catalog.date_part('epoch'," \
	" expires_at OPERATOR(pg_catalog.-) locked_until))"

/*
 * column moved forward by seconds (float8); infinities and NULL stay.
 * IMMUTABLE, as SHIFTED_EXPIRY, for Citus: the epoch is taken of an
 * interval (date_part of a timestamptz is STABLE).
 */
#define SHIFTED(seconds, column) \
	"CASE WHEN " column " IN ('infinity', '-infinity') THEN " column \
	" ELSE pg_catalog.to_timestamp(pg_catalog.date_part('epoch', " column \
	" OPERATOR(pg_catalog.-) '1970-01-01 00:00:00+00'::pg_catalog.timestamptz)" \
	" OPERATOR(pg_catalog.+) " seconds ") END"

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
 * HOT.  The worker moves it forward (IDEM_STMT_EXPIRE_DUE).
 */
/*
 * A stale claim that stale_policy = hold keeps is due at infinity: out of
 * the range each batch scans, and found by an index probe once the policy
 * is reclaim (IDEM_STMT_EXPIRE_DUE).
 */
#define HELD_DUE_AT "'infinity'::pg_catalog.timestamptz"

#define DUE_AT_NO_LATER_THAN(expr) \
	" due_at = LEAST(due_at, " expr ")"

/* IDEM_STMT_EXPIRE_DUE's text: rows taken from source, held the CTE it may need */
#define EXPIRE_DUE(source, held) \
	"WITH due_now AS (SELECT scope, key, " EXPIRE_ACT " AS act, " EXPIRE_NEXT " AS next_due" \
	" FROM " KEYS " WHERE due_at" LE ":now ORDER BY due_at LIMIT :batch_size" \
	" FOR UPDATE SKIP LOCKED)," \
	held " due AS (SELECT * FROM " source ")," \
	" gone AS (DELETE FROM " KEYS " AS k USING due" \
	" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key AND due.act" EQ "'d' RETURNING 1)," \
	" stale AS (UPDATE " KEYS " AS k SET status = 'failed', retryable = true," \
	" locked_until = NULL, updated_at = :now, due_at = k.expires_at FROM due" \
	" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key AND due.act" EQ "'s' RETURNING 1)," \
	" later AS (UPDATE " KEYS " AS k SET due_at = due.next_due FROM due" \
	" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key AND due.act" EQ "'r'" \
	" AND k.due_at IS DISTINCT FROM due.next_due RETURNING 1)" \
	" SELECT (SELECT pg_catalog.count(*) FROM gone), (SELECT pg_catalog.count(*) FROM stale)," \
	" (SELECT pg_catalog.count(*) FROM later)"

/*
 * What expiry does with a row due (of the version it locked): see above.
 * A processing row without a lease end (written by hand) has no lease.
 */
#define EXPIRE_ACT \
	"CASE WHEN expires_at" LE ":now AND (:reclaim OR status" NE "'processing') THEN 'd'" \
	" WHEN :reclaim AND status" EQ "'processing' AND (locked_until IS NULL OR locked_until" LE ":now) THEN 's'" \
	" ELSE 'r' END"

/*
 * A row's next due time, when it needs nothing now: after now, or
 * infinity for a stale claim held (and for rows written by hand with
 * times that give no later one).  A row re-keyed to where it was is not
 * written, nor counted as changed, so a pass ends.
 */
#define EXPIRE_NEXT \
	"CASE WHEN status" NE "'processing' AND expires_at" GT ":now THEN expires_at" \
	" WHEN status" EQ "'processing' AND locked_until" GT ":now AND expires_at" GT ":now" \
	" THEN LEAST(locked_until, expires_at)" \
	" ELSE " HELD_DUE_AT " END"

static const char *const stmt_sql[IDEM_NUM_STMTS] = {
	/*
	 * The whole row, one value: executor start-up builds a result type of
	 * one column instead of nine (callgrind: 5,600 instructions of a new
	 * key's idem_execute); IdemReadRow takes the columns it needs by name.
	 */
	[IDEM_STMT_SELECT] =
	"SELECT k FROM " KEYS " AS k" WHERE_KEY,

	/*
	 * Every value is computed in C and passed as a parameter (no nextval(),
	 * no time arithmetic in SQL), so that on a distributed table Citus can
	 * route each statement to the key's shard.
	 */
	[IDEM_STMT_INSERT] =
	"INSERT INTO " KEYS " (scope, key, status, token, locked_until,"
	" created_at, updated_at, expires_at, request_hash, due_at)"
	" VALUES (:scope, :key, 'processing', :new_token, :lease_end,"
	" :now, :now, :expires_at, :request_hash, :lease_end)"
	" ON CONFLICT (scope, key) DO NOTHING RETURNING token, status",

	/*
	 * Take over a failed-retryable key, or a processing one whose lease ran
	 * out (when :reclaim).  :token is the token seen, so a claim that
	 * changed the row in between makes this a no-op.
	 */
	[IDEM_STMT_TAKEOVER] =
	"UPDATE " KEYS " SET status = 'processing', token = :new_token,"
	" locked_until = :lease_end, expires_at = :expires_at, due_at = :lease_end,"
	" retryable = true, response_code = NULL, response = NULL, updated_at = :now"
	WHERE_KEY AND_TOKEN " AND expires_at" GT ":now"
	" AND ((status" EQ "'failed' AND retryable)"
	" OR (:reclaim AND status" EQ "'processing' AND locked_until" LE ":now))"
	" RETURNING token, status, recovery_point",

	/* Start afresh on a row past expires_at (a processing one when :reclaim) */
	[IDEM_STMT_RENEW] =
	"UPDATE " KEYS " SET status = 'processing', token = :new_token,"
	" locked_until = :lease_end, expires_at = :expires_at, due_at = :lease_end,"
	" created_at = :now, updated_at = :now, request_hash = :request_hash, retryable = true,"
	" response_code = NULL, response = NULL, recovery_point = NULL"
	WHERE_KEY AND_TOKEN " AND expires_at" LE ":now"
	" AND (:reclaim OR status" NE "'processing')"
	" RETURNING token, status",

	/*
	 * Record results.  A processing row keeps expires_at = locked_until +
	 * retention, so the retention its claim asked for carries over here.
	 * The new expires_at is written twice: SET expressions see the old row.
	 */
	[IDEM_STMT_COMPLETE] =
	"UPDATE " KEYS " SET status = 'completed', response_code = :response_code,"
	" response = :response, expires_at = " SHIFTED_EXPIRY(":now_epoch") ","
	DUE_AT_NO_LATER_THAN(SHIFTED_EXPIRY(":now_epoch")) ","
	" locked_until = NULL, updated_at = :now"
	WHERE_KEY AND_TOKEN AND_PROCESSING,

	[IDEM_STMT_FAIL] =
	"UPDATE " KEYS " SET status = 'failed', retryable = :retryable,"
	" response_code = :response_code, response = :response,"
	" expires_at = " SHIFTED_EXPIRY(":now_epoch") ","
	DUE_AT_NO_LATER_THAN(SHIFTED_EXPIRY(":now_epoch")) ","
	" locked_until = NULL, updated_at = :now"
	WHERE_KEY AND_TOKEN AND_PROCESSING,

	[IDEM_STMT_HEARTBEAT] =
	"UPDATE " KEYS " SET locked_until = :lease_end,"
	" expires_at = " SHIFTED_EXPIRY(":lease_end_epoch") ","
	" updated_at = :now"
	WHERE_KEY AND_TOKEN AND_PROCESSING
	" RETURNING locked_until",

	[IDEM_STMT_RELEASE] =
	"DELETE FROM " KEYS WHERE_KEY AND_TOKEN AND_PROCESSING,

	[IDEM_STMT_CHECKPOINT] =
	"UPDATE " KEYS " SET recovery_point = :recovery_point, updated_at = :now"
	WHERE_KEY AND_TOKEN AND_PROCESSING,

	/* Operator settles a processing key; a new token fences the old holder */
	[IDEM_STMT_RESOLVE_FAIL] =
	"UPDATE " KEYS " SET status = 'failed', retryable = false, token = :new_token,"
	" response_code = :response_code, response = :response, locked_until = NULL,"
	" updated_at = :now, expires_at = :expires_at," DUE_AT_NO_LATER_THAN(":expires_at")
	WHERE_KEY AND_PROCESSING,

	[IDEM_STMT_RESOLVE_RELEASE] =
	"DELETE FROM " KEYS WHERE_KEY AND_PROCESSING,

	[IDEM_STMT_LOOKUP] =
	"SELECT * FROM " KEYS WHERE_KEY,

	/*
	 * One batch of expiry: the first :batch_size rows due (an index range
	 * scan of due_at <= :now), and when :reclaim the stale claims that
	 * stale_policy = hold left (due_at = infinity), each locked (SKIP
	 * LOCKED), read once and given what it needs: deleted (past
	 * expires_at; a processing one only when :reclaim), expired (a stale
	 * claim when :reclaim: failed, retryable, due at expires_at), or due
	 * later (a claim's lease end, expires_at once settled, infinity for a
	 * stale claim held).  Every row taken leaves the range it was found in,
	 * so a batch costs what it changes whatever the backlog.  Returns the
	 * rows deleted, expired and given a later due time.  Two statements, so
	 * that under hold no plan looks at the held rows.
	 */
	[IDEM_STMT_EXPIRE_DUE] = EXPIRE_DUE("due_now", ""),
	[IDEM_STMT_EXPIRE_DUE_RECLAIM] = EXPIRE_DUE(
		"due_now UNION ALL SELECT * FROM held LIMIT :batch_size",
		" held AS (SELECT scope, key, " EXPIRE_ACT " AS act, " EXPIRE_NEXT " AS next_due FROM " KEYS
		" WHERE due_at" EQ HELD_DUE_AT " LIMIT :batch_size FOR UPDATE SKIP LOCKED),"),

	/*
	 * The key's lock on Citus, taken before a claim writes the key's row,
	 * held to the end of the transaction, by idem_key_lock() on the node
	 * that holds the key's shard (claim.c).  wait => false only tries it.
	 * Read through the key's row (count(*) always yields one row) so that
	 * Citus runs the statement where the row lives.
	 */
	[IDEM_STMT_LOCK_KEY] =
	"SELECT " NSP ".idem_key_lock(:scope, :key, 0), pg_catalog.count(*)"
	" FROM " KEYS WHERE_KEY,

	[IDEM_STMT_TRY_LOCK_KEY] =
	"SELECT " NSP ".idem_key_lock(:scope, :key, 1), pg_catalog.count(*)"
	" FROM " KEYS WHERE_KEY,

	/*
	 * wait => false in a transaction that holds CLAIM_MAX_KEY_LOCKS already:
	 * is the key's lock free?  Taken and released at once.
	 */
	[IDEM_STMT_PROBE_LOCK_KEY] =
	"SELECT " NSP ".idem_key_lock(:scope, :key, 2), pg_catalog.count(*)"
	" FROM " KEYS WHERE_KEY,

	/* wait => false, before updating a row: lock it, or learn who holds it */
	[IDEM_STMT_TRY_LOCK_ROW] =
	"SELECT token FROM " KEYS WHERE_KEY " FOR NO KEY UPDATE SKIP LOCKED",

	/*
	 * A write that waited (for a row lock, or for another transaction's
	 * insert of the key) was stamped before the wait: its lease end and
	 * expiry move forward by :shift seconds, so that they count from after
	 * it, and created_at too where that write set it (IdemRestampIfWaited).
	 * due_at moves with them, which keeps it at or before the lease end and
	 * expires_at.
	 */
	[IDEM_STMT_RESTAMP] =
	"UPDATE " KEYS " SET locked_until = " SHIFTED(":shift", "locked_until") ","
	" expires_at = " SHIFTED(":shift", "expires_at") ","
	" due_at = " SHIFTED(":shift", "due_at") ","
	" created_at = CASE WHEN created_at" EQ ":stamped THEN :now ELSE created_at END,"
	" updated_at = :now"
	WHERE_KEY AND_TOKEN
	" RETURNING token, status, locked_until",

	/*
	 * idem_execute's new key: the key row written once, completed, after
	 * the caller's statement ran, in a subtransaction (execute.c).  A plain
	 * INSERT: a key claimed meanwhile makes it wait for that claim and then
	 * fail with unique_violation, which execute.c handles; no ON CONFLICT,
	 * whose speculative insertion costs a WAL record more.
	 */
	[IDEM_STMT_INSERT_COMPLETED] =
	"INSERT INTO " KEYS " (scope, key, status, token, created_at, updated_at,"
	" expires_at, request_hash, response_code, response, due_at)"
	" VALUES (:scope, :key, 'completed', :new_token, :now, :now,"
	" :expires_at, :request_hash, :response_code, :response, :expires_at)",
};

/*
 * The statements that differ on a table of schema 0.1.0 / 0.2.0 (no due_at
 * column, the expires_at and partial lease indexes): the library serves
 * such a database between the package's upgrade and ALTER EXTENSION
 * idempotency UPDATE.  Expiry's re-keying has no counterpart there.
 */
static const char *const stmt_sql_v02[IDEM_NUM_STMTS] = {
	[IDEM_STMT_RESTAMP] =
	"UPDATE " KEYS " SET locked_until = " SHIFTED(":shift", "locked_until") ","
	" expires_at = " SHIFTED(":shift", "expires_at") ","
	" created_at = CASE WHEN created_at" EQ ":stamped THEN :now ELSE created_at END,"
	" updated_at = :now"
	WHERE_KEY AND_TOKEN
	" RETURNING token, status, locked_until",

	[IDEM_STMT_INSERT] =
	"INSERT INTO " KEYS " (scope, key, status, token, locked_until,"
	" created_at, updated_at, expires_at, request_hash)"
	" VALUES (:scope, :key, 'processing', :new_token, :lease_end,"
	" :now, :now, :expires_at, :request_hash)"
	" ON CONFLICT (scope, key) DO NOTHING RETURNING token, status",

	[IDEM_STMT_TAKEOVER] =
	"UPDATE " KEYS " SET status = 'processing', token = :new_token,"
	" locked_until = :lease_end, expires_at = :expires_at,"
	" retryable = true, response_code = NULL, response = NULL, updated_at = :now"
	WHERE_KEY AND_TOKEN " AND expires_at" GT ":now"
	" AND ((status" EQ "'failed' AND retryable)"
	" OR (:reclaim AND status" EQ "'processing' AND locked_until" LE ":now))"
	" RETURNING token, status, recovery_point",

	[IDEM_STMT_RENEW] =
	"UPDATE " KEYS " SET status = 'processing', token = :new_token,"
	" locked_until = :lease_end, expires_at = :expires_at,"
	" created_at = :now, updated_at = :now, request_hash = :request_hash, retryable = true,"
	" response_code = NULL, response = NULL, recovery_point = NULL"
	WHERE_KEY AND_TOKEN " AND expires_at" LE ":now"
	" AND (:reclaim OR status" NE "'processing')"
	" RETURNING token, status",

	[IDEM_STMT_COMPLETE] =
	"UPDATE " KEYS " SET status = 'completed', response_code = :response_code,"
	" response = :response, expires_at = " SHIFTED_EXPIRY(":now_epoch") ","
	" locked_until = NULL, updated_at = :now"
	WHERE_KEY AND_TOKEN AND_PROCESSING,

	[IDEM_STMT_FAIL] =
	"UPDATE " KEYS " SET status = 'failed', retryable = :retryable,"
	" response_code = :response_code, response = :response,"
	" expires_at = " SHIFTED_EXPIRY(":now_epoch") ","
	" locked_until = NULL, updated_at = :now"
	WHERE_KEY AND_TOKEN AND_PROCESSING,

	[IDEM_STMT_RESOLVE_FAIL] =
	"UPDATE " KEYS " SET status = 'failed', retryable = false, token = :new_token,"
	" response_code = :response_code, response = :response, locked_until = NULL,"
	" updated_at = :now, expires_at = :expires_at"
	WHERE_KEY AND_PROCESSING,

	[IDEM_STMT_EXPIRE_STALE] =
	"UPDATE " KEYS " AS k SET status = 'failed', retryable = true,"
	" locked_until = NULL, updated_at = :now"
	" FROM (SELECT scope, key FROM " KEYS
	" WHERE status" EQ "'processing' AND locked_until" LE ":now"
	" ORDER BY locked_until LIMIT :batch_size FOR UPDATE SKIP LOCKED) AS due"
	" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key",

	[IDEM_STMT_EXPIRE_DELETE] =
	"DELETE FROM " KEYS " AS k USING (SELECT scope, key FROM " KEYS
	" WHERE expires_at" LE ":now AND (:reclaim OR status" NE "'processing')"
	" ORDER BY expires_at LIMIT :batch_size FOR UPDATE SKIP LOCKED) AS due"
	" WHERE k.scope" EQ "due.scope AND k.key" EQ "due.key",

	[IDEM_STMT_INSERT_COMPLETED] =
	"INSERT INTO " KEYS " (scope, key, status, token, created_at, updated_at,"
	" expires_at, request_hash, response_code, response)"
	" VALUES (:scope, :key, 'completed', :new_token, :now, :now,"
	" :expires_at, :request_hash, :response_code, :response)",
};

/* A saved plan and the parameters its $1, $2, ... stand for */
typedef struct SavedStmt
{
	SPIPlanPtr	plan;
	int			nparams;
	IdemParam	param[STMT_MAX_PARAMS];
} SavedStmt;

/* Saved plans, valid for the schema they were prepared for */
static Oid	plans_nspid = InvalidOid;
static SavedStmt saved[IDEM_NUM_STMTS];

/*
 * The table, and whether it has the due_at column of 0.3.0: both looked
 * up again after a relcache invalidation of the table (ALTER EXTENSION ...
 * UPDATE changes it, DROP EXTENSION drops it), and then the saved plans
 * are made again from the other texts if its shape changed.
 */
static Oid	keys_relid = InvalidOid;
static bool keys_shape_known = false;
static bool keys_have_due_at = true;
static bool keys_have_lock_function = true;	/* idem_key_lock(), 0.4.0 on */
static bool keys_callback = false;

/* Cursor options the saved plans were prepared with (IdemPlanOptions) */
static int	plans_options = 0;

static void
KeysInvalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == keys_relid)
	{
		keys_relid = InvalidOid;
		keys_shape_known = false;
	}
}

/* A statement's text for the table's schema version */
static const char *
StmtSql(IdemStmt stmt)
{
	if (!keys_have_due_at && stmt_sql_v02[stmt] != NULL)
		return stmt_sql_v02[stmt];
	if (stmt_sql[stmt] == NULL)
		elog(ERROR, "statement %d has no text for this table's shape", (int) stmt);
	return stmt_sql[stmt];
}

/* Forget every saved plan */
static void
FreePlans(void)
{
	for (int i = 0; i < IDEM_NUM_STMTS; i++)
	{
		if (saved[i].plan != NULL)
			SPI_freeplan(saved[i].plan);
		saved[i].plan = NULL;
	}
}

/*
 * The OID of idempotency_keys in the extension's schema nspid, for
 * privilege checks and the table's shape.
 */
Oid
IdemKeysRelid(Oid nspid)
{
	if (plans_nspid != nspid || !OidIsValid(keys_relid))
	{
		if (!keys_callback)
		{
			CacheRegisterRelcacheCallback(KeysInvalidate, (Datum) 0);
			keys_callback = true;
		}
		keys_relid = get_relname_relid("idempotency_keys", nspid);
		if (!OidIsValid(keys_relid))
			elog(ERROR, "idempotency_keys is missing from the extension's schema");
	}
	return keys_relid;
}

/*
 * Refuse to run when row level security policies are recorded for
 * idempotency_keys (idempotency_row_security, 0.4.0 on) but the table's
 * row level security is off, or one of them is missing from it: a restore
 * that did not put them back (see idem_restore_row_security) would let
 * every tenant read every other's keys.  Checked when the table's relcache entry is new, which ENABLE and
 * DISABLE ROW LEVEL SECURITY and every policy change make it.  Called
 * inside SPI.
 */
static void
CheckRowSecurityInPlace(Oid nspid, Oid relid)
{
	Oid			saved = get_relname_relid("idempotency_row_security", nspid);
	HeapTuple	tup;
	bool		enabled;
	char	   *sql;
	Datum		arg = ObjectIdGetDatum(relid);

	if (!OidIsValid(saved))
		return;					/* a schema before 0.4.0 */
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	enabled = ((Form_pg_class) GETSTRUCT(tup))->relrowsecurity;
	ReleaseSysCache(tup);
	/* a recorded policy: any, with row level security off; else one missing */
	sql = psprintf("SELECT policy FROM %s.idempotency_row_security r WHERE %s LIMIT 1",
				   quote_identifier(get_namespace_name(nspid)),
				   enabled ? "NOT EXISTS (SELECT FROM pg_catalog.pg_policy p"
				   " WHERE p.polrelid OPERATOR(pg_catalog.=) $1"
				   " AND p.polname OPERATOR(pg_catalog.=) r.policy)" : "$1 IS NOT NULL");
	if (SPI_execute_with_args(sql, 1, (Oid[]) {OIDOID}, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read idempotency_row_security");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_ROW_SECURITY_MISSING),
				 errmsg("row level security of idempotency_keys is not in place"),
				 enabled ?
				 errdetail("Policy \"%s\" is recorded in idempotency_row_security but missing from idempotency_keys.",
						   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)) :
				 errdetail("Policies are recorded in idempotency_row_security, but row level security is disabled on idempotency_keys."),
				 errhint("As the table's owner, run SELECT idem_restore_row_security(); or, to run without the policies, delete their rows from idempotency_row_security.")));
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
 * How the statements we keep (ours, and idem_execute's caller's) are
 * planned: as PostgreSQL chooses, but under Citus a custom plan for every
 * execution.  Citus 13.2 plans a generic plan's shard query again at each
 * execution on the node that holds the shard (its local plan cache looks
 * the task up in the generic plan, which has none) and adds every copy to
 * the generic plan's memory: a backend running our statements on a worker
 * grew by about 160 kB a call, without end (test/citus, citus/memory).
 * A custom plan does that planning once per execution too, and frees it.
 */
static int
PlanOptionsNow(void)
{
	return IdemCitusPresent() ? CURSOR_OPT_CUSTOM_PLAN : 0;
}

/*
 * The cursor options for a statement to keep, as known for the table of
 * schema nspid (read again with its shape, after a relcache invalidation:
 * distributing the table sends one).
 */
int
IdemPlanOptions(Oid nspid)
{
	(void) IdemKeysHaveDueAt(nspid);
	return plans_options;
}

/*
 * SPI_execute_plan of a plan prepared with IdemPlanOptions.  The setting
 * plan_cache_mode = force_generic_plan outranks a plan's own
 * CURSOR_OPT_CUSTOM_PLAN; under Citus it is set to force_custom_plan for
 * the execution, so that no role or database setting brings the growth
 * back.
 */
int
IdemRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only,
			long count)
{
	int			level = -1;
	int			rc;

	if (plan_cache_mode == PLAN_CACHE_MODE_FORCE_GENERIC_PLAN && IdemCitusPresent())
	{
		level = NewGUCNestLevel();
		(void) set_config_option("plan_cache_mode", "force_custom_plan",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	rc = SPI_execute_plan(plan, values, nulls, read_only, count);
	if (level >= 0)
		AtEOXact_GUC(true, level);
	return rc;
}

/*
 * Pin search_path to pg_catalog, pg_temp for the extension's own
 * statements; undo with IdemUnpinSearchPath(pin), in the same
 * (sub)transaction.  An error in between is undone by the
 * (sub)transaction's abort, as a SET clause's setting is.
 *
 * Every C function that runs SQL pins the path this way, for exactly the
 * span of its own statements (IdemConnect for a whole SPI session; in
 * idem_execute around each of its own statements, since the caller's
 * statement runs under the caller's path), instead of by a SET clause.
 * The statements are schema-qualified throughout anyway; the pin keeps
 * their saved plans under one path, so that the plan cache's path check
 * passes instead of parsing them again, and keeps the caller's path from
 * the code they run in turn (a trigger or a row level security policy on
 * the table, which may have a SET clause of its own).
 *
 * The pin sets the GUC, exactly as a SET clause does (a save, the setting,
 * a restore at the nest level's end), and nothing cheaper: an override
 * search path (PushOverrideSearchPath, before PostgreSQL 17), which the
 * functions used until 2026-11-26, makes PostgreSQL ignore the GUC while it
 * is pushed, so a trigger's or a policy helper's own SET search_path = app,
 * pg_temp did not apply under it, and an unqualified name in that helper
 * resolved in the caller's temporary schema: a tenant's temporary table
 * took a SECURITY DEFINER audit trigger's rows, or a policy helper's
 * mapping table, and ran the tenant's code as the helper's owner (a review
 * session's reproduction; PostgreSQL itself dropped that use of the
 * override for the same reason, CVE-2023-2454).  test/pgtap/security.sql
 * checks both that the extension's statements run under the pinned path
 * and that such a trigger's own path applies.
 */
int
IdemPinSearchPath(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

void
IdemUnpinSearchPath(int level)
{
	AtEOXact_GUC(true, level);
}

/*
 * SPI_connect with search_path pinned for the SPI session; returns the pin
 * for IdemFinish.
 */
int
IdemConnect(void)
{
	SPI_connect();
	return IdemPinSearchPath();
}

/* The pin undone, then SPI_finish */
void
IdemFinish(int pin)
{
	IdemUnpinSearchPath(pin);
	SPI_finish();
}

/*
 * Does idempotency_keys in schema nspid have due_at (schema 0.3.0 and
 * later)?  When this changes, or Citus comes or goes (IdemPlanOptions),
 * the saved plans are made again.
 */
bool
IdemKeysHaveDueAt(Oid nspid)
{
	if (!keys_shape_known || plans_nspid != nspid)
	{
		Oid			relid = IdemKeysRelid(nspid);
		bool		has = get_attnum(relid, "due_at") != InvalidAttrNumber;
		int			options = PlanOptionsNow();

		CheckRowSecurityInPlace(nspid, relid);

		if (has != keys_have_due_at || options != plans_options)
			FreePlans();
		keys_have_due_at = has;
		keys_have_lock_function =
			OidIsValid(LookupFuncName(list_make2(makeString(get_namespace_name(nspid)),
												 makeString("idem_key_lock")),
									  3, (Oid[]) {TEXTOID, TEXTOID, INT4OID}, true));
		plans_options = options;
		/* an invalidation taken in get_attnum cleared keys_relid: ask again next time */
		keys_shape_known = (keys_relid == relid);
	}
	return keys_have_due_at;
}

/*
 * Does the extension's schema have idem_key_lock() (0.4.0 on), which a
 * claim on Citus routes to the key's shard?  Between the library's update
 * and ALTER EXTENSION idempotency UPDATE it may not.
 */
bool
IdemKeyLockFunctionExists(Oid nspid)
{
	(void) IdemKeysHaveDueAt(nspid);
	return keys_have_lock_function;
}

/* The parameter a :name stands for */
static IdemParam
ParamNamed(const char *name, int len)
{
	for (int p = 0; p < IDEM_NUM_PARAMS; p++)
	{
		if (strlen(params[p].name) == (size_t) len &&
			strncmp(params[p].name, name, len) == 0)
			return (IdemParam) p;
	}
	elog(ERROR, "unknown statement parameter :%.*s", len, name);
	pg_unreachable();
}

/*
 * A statement's text with each :name replaced by $n, numbering the
 * parameters in order of first use; stmt->param gets the list.  Quoted
 * text and :: casts are left alone.  With scope_literal, :scope is
 * replaced by it instead, as text (InlinedScopeRun); the result is still
 * a format for psprintf, so a '%' in it is written twice.
 */
static char *
NumberParams(const char *sql, SavedStmt *stmt, const char *scope_literal)
{
	StringInfoData buf;
	char		quote = '\0';

	initStringInfo(&buf);
	stmt->nparams = 0;
	for (const char *p = sql; *p != '\0'; p++)
	{
		const char *end = p + 1;
		IdemParam	param;
		int			n;

		if (quote == '\0' && (*p == '\'' || *p == '"'))
			quote = *p;
		else if (*p == quote)
			quote = '\0';
		if (quote != '\0' || *p != ':' || !(p[1] >= 'a' && p[1] <= 'z') ||
			(p > sql && p[-1] == ':'))
		{
			appendStringInfoChar(&buf, *p);
			continue;
		}
		while ((*end >= 'a' && *end <= 'z') || *end == '_')
			end++;
		param = ParamNamed(p + 1, end - p - 1);
		p = end - 1;
		if (param == IDEM_PARAM_SCOPE && scope_literal != NULL)
		{
			for (const char *c = scope_literal; *c != '\0'; c++)
			{
				if (*c == '%')
					appendStringInfoChar(&buf, '%');
				appendStringInfoChar(&buf, *c);
			}
			continue;
		}
		for (n = 0; n < stmt->nparams && stmt->param[n] != param; n++)
			;
		if (n == stmt->nparams)
		{
			if (n == STMT_MAX_PARAMS)
				elog(ERROR, "statement has more than %d parameters", STMT_MAX_PARAMS);
			stmt->param[stmt->nparams++] = param;
		}
		appendStringInfo(&buf, "$%d", n + 1);
	}
	return buf.data;
}

/* Each parameter's type, for SPI_prepare */
static void
ParamTypes(const SavedStmt *stmt, Oid *types)
{
	for (int i = 0; i < stmt->nparams; i++)
		types[i] = params[stmt->param[i]].type;
}

/*
 * The values of a statement's parameters in SPI's form, from args.  A
 * parameter not set is a bug of the caller's, reported rather than run
 * with a zero.
 */
static void
BindArgs(IdemStmt stmtid, const SavedStmt *stmt, const IdemArgs *args,
		 Datum *values, char *nulls)
{
	for (int i = 0; i < stmt->nparams; i++)
	{
		IdemParam	p = stmt->param[i];

		if ((args->given & (UINT32_C(1) << p)) == 0)
			elog(ERROR, "statement %d was run without its parameter :%s",
				 (int) stmtid, params[p].name);
		values[i] = args->value[p];
		nulls[i] = args->isnull[p] ? 'n' : ' ';
	}
}

/*
 * The saved plan of a statement for the extension in schema nspid,
 * preparing it on first use.  Must be called inside SPI_connect.
 */
static const SavedStmt *
SavedPlan(IdemStmt stmt, Oid nspid)
{
	SavedStmt  *s = &saved[stmt];

	if (plans_nspid != nspid)
	{
		/* first use, or the extension was re-created elsewhere */
		FreePlans();
		plans_nspid = nspid;
		keys_relid = InvalidOid;
		keys_shape_known = false;
	}
	if (!keys_shape_known)
		(void) IdemKeysHaveDueAt(nspid);

	if (s->plan == NULL)
	{
		char	   *nspname = get_namespace_name(nspid);
		char	   *sql;
		Oid			types[STMT_MAX_PARAMS];
		SPIPlanPtr	plan;

		if (nspname == NULL)
			elog(ERROR, "cache lookup failed for namespace %u", nspid);
		sql = psprintf(NumberParams(StmtSql(stmt), s, NULL),
					   psprintf("%s.idempotency_keys", quote_identifier(nspname)),
					   quote_identifier(nspname));
		ParamTypes(s, types);
		plan = SPI_prepare_cursor(sql, s->nparams, types, plans_options);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		s->plan = plan;
	}
	return s;
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
 * Cached in fn_extra, so the catalog is read once per execution of the
 * calling statement.  Not for set-returning functions, whose fn_extra
 * belongs to funcapi.
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
 * The row types our functions return (idem_claim, idem_execute), by
 * function OID, for the backend's life: building one from pg_proc's OUT
 * parameters is 6% of a replay (bench/profile.sh), and a statement's FmgrInfo
 * lasts one execution only.  The descriptors are the record type cache's
 * own (blessed: permanent, never freed), so a change to pg_proc only
 * empties this list.
 */
#define RESULT_DESC_SLOTS 4

static struct
{
	Oid			fn_oid;
	TupleDesc	desc;
}			result_descs[RESULT_DESC_SLOTS];
static bool result_descs_callback = false;

static void
ResultDescsInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	memset(result_descs, 0, sizeof(result_descs));
}

/* The row type a function of ours returns, blessed */
TupleDesc
IdemResultDesc(FunctionCallInfo fcinfo)
{
	Oid			fn_oid = fcinfo->flinfo->fn_oid;
	TupleDesc	desc;
	int			i;

	for (i = 0; i < RESULT_DESC_SLOTS && result_descs[i].desc != NULL; i++)
	{
		if (result_descs[i].fn_oid == fn_oid)
			return result_descs[i].desc;
	}
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	desc = BlessTupleDesc(desc);
	if (i == RESULT_DESC_SLOTS)
		return desc;			/* more functions than slots: not kept */
	if (!result_descs_callback)
	{
		CacheRegisterSyscacheCallback(PROCOID, ResultDescsInvalidate, (Datum) 0);
		result_descs_callback = true;
	}
	/* the cache's copy (lookup_rowtype_tupdesc pins it; it stays) */
	result_descs[i].desc = lookup_rowtype_tupdesc(RECORDOID, desc->tdtypmod);
	ReleaseTupleDesc(result_descs[i].desc);
	result_descs[i].fn_oid = fn_oid;
	return result_descs[i].desc;
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

/*
 * A write on the key's row stamped with the time stamped (taken after its
 * plan was made), holding token, has just run.  If it ran longer than
 * IDEM_STAMP_SLACK_USECS, it was held up (for a row lock, for another
 * transaction's insert of the key, or by a slow moment), and the lease and
 * expiry it wrote count from before: move them forward to count from now
 * (IDEM_STMT_RESTAMP; the row is this transaction's, so nothing waits
 * again).  Returns whether it did; then SPI_tuptable has the row's token,
 * status and locked_until.  Must be called inside SPI.
 */
bool
IdemRestampIfWaited(Oid nspid, text *scope, text *key, int64 token,
					TimestampTz stamped)
{
	TimestampTz now = GetCurrentTimestamp();
	IdemArgs	args;

	if (now - stamped <= IDEM_STAMP_SLACK_USECS)
		return false;
	args = IdemKeyArgs(scope, key);
	IdemArg(&args, IDEM_PARAM_TOKEN, Int64GetDatum(token));
	IdemArg(&args, IDEM_PARAM_NOW, TimestampTzGetDatum(now));
	IdemArg(&args, IDEM_PARAM_STAMPED, TimestampTzGetDatum(stamped));
	IdemArg(&args, IDEM_PARAM_SHIFT,
			Float8GetDatum((double) (now - stamped) / USECS_PER_SEC));
	if (IdemExecute(IDEM_STMT_RESTAMP, nspid, &args, false, 0) != 1)
		elog(ERROR, "could not restamp the idempotency key's row after a wait");
	return true;
}

/* Does row level security apply to the current role on idempotency_keys? */
bool
IdemRlsApplies(Oid nspid)
{
	return check_enable_rls(IdemKeysRelid(nspid), InvalidOid, true) == RLS_ENABLED;
}

/*
 * Should the statement run with its scope written into its text?  On Citus,
 * the key's read (a claim's, idem_execute's, idem_lookup's) and its
 * complete, where the key's shard is on this node (the call was delegated,
 * or made on that worker).  Citus (13.2 and 14.0) plans a SELECT, UPDATE
 * or DELETE whose distribution column is compared with a constant straight
 * on the local shard (its local fast path); compared with a parameter, it
 * plans the statement for the table, and at each execution deparses it for
 * the shard and parses and plans that text again (its cache of such plans,
 * for a saved generic plan, never hits: see PlanOptionsNow).  Parsing our
 * text once per call costs less.  An INSERT is planned the second way
 * whatever its values, so the key row's INSERT keeps its parameters.
 * Elsewhere, and on a plain server, the saved plan is cheaper.
 */
static bool
ScopeInlined(IdemStmt stmt, const IdemShard *shard)
{
	return (stmt == IDEM_STMT_SELECT || stmt == IDEM_STMT_LOOKUP ||
			stmt == IDEM_STMT_COMPLETE) && OidIsValid(shard->relid);
}

/*
 * Run a statement with its scope written into its text as a quoted
 * literal (ScopeInlined), parsed and planned for this call only.
 */
static int
InlinedScopeRun(IdemStmt stmt, Oid nspid, const IdemArgs *args,
				bool read_only, long count)
{
	SavedStmt	s;
	char	   *nspname = get_namespace_name(nspid);
	char	   *scope = text_to_cstring(DatumGetTextPP(args->value[IDEM_PARAM_SCOPE]));
	char	   *sql;
	Oid			types[STMT_MAX_PARAMS];
	Datum		values[STMT_MAX_PARAMS];
	char		nulls[STMT_MAX_PARAMS];

	if (nspname == NULL)
		elog(ERROR, "cache lookup failed for namespace %u", nspid);
	sql = psprintf(NumberParams(StmtSql(stmt), &s, quote_literal_cstr(scope)),
				   psprintf("%s.idempotency_keys", quote_identifier(nspname)),
				   quote_identifier(nspname));
	ParamTypes(&s, types);
	BindArgs(stmt, &s, args, values, nulls);
	return SPI_execute_with_args(sql, s.nparams, types, values, nulls,
								 read_only, count);
}

/* The statement's :scope argument; NULL if it has none */
static text *
ScopeArg(const IdemArgs *args)
{
	if ((args->given & (UINT32_C(1) << IDEM_PARAM_SCOPE)) == 0 ||
		args->isnull[IDEM_PARAM_SCOPE])
		return NULL;
	return DatumGetTextPP(args->value[IDEM_PARAM_SCOPE]);
}

/*
 * Make the statement's saved plan now, if it is not made yet, so that a
 * time taken next and the statement's run are not apart by its planning.
 */
void
IdemPrepare(IdemStmt stmt, Oid nspid)
{
	(void) SavedPlan(stmt, nspid);
}

/*
 * Run a saved statement with args; returns SPI_processed.  On Citus, a
 * statement on a key first holds the key's shard where it is until the
 * transaction ends (IdemCitusHoldShard), then runs through Citus.
 */
int
IdemExecute(IdemStmt stmt, Oid nspid, const IdemArgs *args, bool read_only,
			long count)
{
	const SavedStmt *s = SavedPlan(stmt, nspid);
	text	   *scope = ScopeArg(args);
	IdemShard	shard = {0};
	Datum		values[STMT_MAX_PARAMS];
	char		nulls[STMT_MAX_PARAMS];
	int			rc;

	if (scope != NULL && IdemKeyShard(nspid, scope, &shard))
		IdemCitusHoldShard(nspid, shard.shardid);
	if (ScopeInlined(stmt, &shard))
	{
		rc = InlinedScopeRun(stmt, nspid, args, read_only, count);
		if (rc < 0)
			elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
		return (int) SPI_processed;
	}
	BindArgs(stmt, s, args, values, nulls);
	rc = IdemRunPlan(s->plan, values, nulls, read_only, count);
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
IdemExecuteOn(IdemStmt stmt, const char *relation, const IdemArgs *args)
{
	SavedStmt	s;
	char	   *sql = psprintf(NumberParams(StmtSql(stmt), &s, NULL), relation);
	Oid			types[STMT_MAX_PARAMS];
	Datum		values[STMT_MAX_PARAMS];
	char		nulls[STMT_MAX_PARAMS];
	int			rc;

	ParamTypes(&s, types);
	BindArgs(stmt, &s, args, values, nulls);
	rc = SPI_execute_with_args(sql, s.nparams, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/*
 * The status type's three values (enum OIDs), for the type typid, read once
 * per backend: a row's status is compared with them, and a row written
 * without RETURNING gets its status from them.  Kept until the type
 * changes (a syscache callback on pg_type).
 */
static const char *const status_labels[] = {
	[IDEM_PROCESSING] = "processing",
	[IDEM_COMPLETED] = "completed",
	[IDEM_FAILED] = "failed",
};

static Oid	status_typid = InvalidOid;
static Datum status_values[lengthof(status_labels)];
static bool status_callback = false;

static void
StatusValuesInvalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	status_typid = InvalidOid;
}

/* The enum value of status, of the status type typid */
Datum
IdemStatusValue(Oid typid, IdemStatus status)
{
	if (typid != status_typid)
	{
		size_t		i;

		if (!status_callback)
		{
			CacheRegisterSyscacheCallback(TYPEOID, StatusValuesInvalidate, (Datum) 0);
			status_callback = true;
		}
		status_typid = InvalidOid;
		for (i = 0; i < lengthof(status_labels); i++)
			status_values[i] = DirectFunctionCall2(enum_in,
												   CStringGetDatum(status_labels[i]),
												   ObjectIdGetDatum(typid));
		status_typid = typid;
	}
	return status_values[status];
}

/* Which status the enum value is */
static IdemStatus
StatusOf(Datum value, Oid typid)
{
	if (value == IdemStatusValue(typid, IDEM_PROCESSING))
		return IDEM_PROCESSING;
	if (value == IdemStatusValue(typid, IDEM_COMPLETED))
		return IDEM_COMPLETED;
	if (value == IdemStatusValue(typid, IDEM_FAILED))
		return IDEM_FAILED;
	elog(ERROR, "unexpected idempotency_status value %u", DatumGetObjectId(value));
	pg_unreachable();
}

/* The columns of IDEM_STMT_SELECT, read by name */
typedef enum RowColumn
{
	COL_STATUS,
	COL_REQUEST_HASH,
	COL_RESPONSE_CODE,
	COL_RESPONSE,
	COL_TOKEN,
	COL_LOCKED_UNTIL,
	COL_RECOVERY_POINT,
	COL_RETRYABLE,
	COL_EXPIRES_AT,
	ROW_NCOLUMNS
} RowColumn;

static const char *const row_column_names[ROW_NCOLUMNS] = {
	[COL_STATUS] = "status",
	[COL_REQUEST_HASH] = "request_hash",
	[COL_RESPONSE_CODE] = "response_code",
	[COL_RESPONSE] = "response",
	[COL_TOKEN] = "token",
	[COL_LOCKED_UNTIL] = "locked_until",
	[COL_RECOVERY_POINT] = "recovery_point",
	[COL_RETRYABLE] = "retryable",
	[COL_EXPIRES_AT] = "expires_at",
};

/*
 * Their numbers in the row types read lately: the table's, and on Citus
 * those of the shards Citus's local execution read the row from (a shard
 * made after a column was dropped from the table numbers its columns
 * without the gap); the oldest is replaced when all are taken.  Each is
 * known by its type cache entry's identifier, which changes whenever the
 * type's columns do.
 */
#define ROW_TYPES 64

typedef struct RowType
{
	uint64		ident;			/* assign_record_type_identifier; 0: empty */
	int			attnums[ROW_NCOLUMNS];
} RowType;

static RowType row_types[ROW_TYPES];
static int	row_types_next = 0;

/* The columns' numbers in desc, the row type of the key's row */
static const int *
RowAttnums(TupleDesc desc)
{
	uint64		ident = assign_record_type_identifier(desc->tdtypeid, desc->tdtypmod);
	RowType    *t;

	for (int i = 0; i < ROW_TYPES; i++)
	{
		if (row_types[i].ident == ident)
			return row_types[i].attnums;
	}
	t = &row_types[row_types_next];
	row_types_next = (row_types_next + 1) % ROW_TYPES;
	t->ident = 0;
	for (int col = 0; col < ROW_NCOLUMNS; col++)
	{
		int			attnum = SPI_fnumber(desc, row_column_names[col]);

		if (attnum <= 0)
			elog(ERROR, "key row has no column \"%s\"", row_column_names[col]);
		t->attnums[col] = attnum;
	}
	t->ident = ident;
	return t->attnums;
}

/* The key's row, its columns taken apart once (heap_deform_tuple) */
typedef struct KeyRow
{
	Datum	   *values;			/* by attnum - 1, as nulls */
	bool	   *nulls;
	const int  *attnums;		/* RowAttnums of its row type */
	Oid			status_type;
} KeyRow;

/* Take the whole-row value d apart into *kr, in the current memory context */
static void
DeformKeyRow(Datum d, KeyRow *kr)
{
	HeapTupleHeader header = DatumGetHeapTupleHeader(d);
	TupleDesc	desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(header),
											  HeapTupleHeaderGetTypMod(header));
	HeapTupleData whole;

	whole.t_len = HeapTupleHeaderGetDatumLength(header);
	ItemPointerSetInvalid(&whole.t_self);
	whole.t_tableOid = InvalidOid;
	whole.t_data = header;
	kr->values = palloc(sizeof(Datum) * desc->natts);
	kr->nulls = palloc(sizeof(bool) * desc->natts);
	heap_deform_tuple(&whole, desc, kr->values, kr->nulls);
	kr->attnums = RowAttnums(desc);
	kr->status_type = TupleDescAttr(desc, kr->attnums[COL_STATUS] - 1)->atttypid;
	ReleaseTupleDesc(desc);
}

/* One column of the key's row */
static Datum
RowValue(const KeyRow *kr, RowColumn col, bool *isnull)
{
	int			i = kr->attnums[col] - 1;

	*isnull = kr->nulls[i];
	return kr->values[i];
}

/*
 * Copy the first row of an IDEM_STMT_SELECT result into row, allocating
 * in mcxt.  Sets row->found to false when there is no row.
 */
void
IdemReadRow(IdemRow *row, MemoryContext mcxt)
{
	KeyRow		kr;
	bool		isnull;
	Datum		d;
	MemoryContext old;

	memset(row, 0, sizeof(IdemRow));
	if (SPI_processed == 0)
		return;

	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		elog(ERROR, "key row read as NULL");
	DeformKeyRow(d, &kr);
	old = MemoryContextSwitchTo(mcxt);

	row->found = true;
	row->status = RowValue(&kr, COL_STATUS, &isnull);
	row->status_code = StatusOf(row->status, kr.status_type);
	d = RowValue(&kr, COL_REQUEST_HASH, &isnull);
	row->request_hash = isnull ? NULL : DatumGetByteaPCopy(d);
	d = RowValue(&kr, COL_RESPONSE_CODE, &isnull);
	row->response_code_null = isnull;
	row->response_code = isnull ? 0 : DatumGetInt32(d);
	d = RowValue(&kr, COL_RESPONSE, &isnull);
	row->response = isnull ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
	row->token = DatumGetInt64(RowValue(&kr, COL_TOKEN, &isnull));
	d = RowValue(&kr, COL_LOCKED_UNTIL, &isnull);
	row->locked_until_null = isnull;
	row->locked_until = isnull ? 0 : DatumGetTimestampTz(d);
	d = RowValue(&kr, COL_RECOVERY_POINT, &isnull);
	row->recovery_point = isnull ? NULL : DatumGetTextPCopy(d);
	row->retryable = DatumGetBool(RowValue(&kr, COL_RETRYABLE, &isnull));
	row->expires_at = DatumGetTimestampTz(RowValue(&kr, COL_EXPIRES_AT, &isnull));

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

/*
 * The longest recovery point: a marker of how far a request got.  With a
 * response's text at most IDEM_MAX_RESPONSE_TEXT (which COPY's escapes
 * can double) and a 32-byte request hash, a row's COPY line stays far
 * below 1 GB.
 */
#define IDEM_MAX_RECOVERY_POINT	(1024 * 1024)

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
			return IdemNumericTextLength(v->val.numeric);
		case jbvBool:
			return 5;
		default:
			return 4;			/* null */
	}
}

/*
 * Would the response's text form be longer than IDEM_MAX_RESPONSE_TEXT?
 * Counted without writing it, and without counting further than that.
 */
static bool
ResponseTooLong(Datum response)
{
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	Size		len = 0;

	if (toast_raw_datum_size(response) <= IDEM_RESPONSE_CHECK_BYTES)
		return false;
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
	return len > IDEM_MAX_RESPONSE_TEXT;
}

/*
 * Refuse a response whose text form would be longer than
 * IDEM_MAX_RESPONSE_TEXT: a row pg_dump cannot write would break every
 * tenant's backup.
 */
void
IdemCheckResponse(Datum response, text *key, text *scope)
{
	if (ResponseTooLong(response))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("response is too large to store"),
				 errdetail("The response for key \"%s\" in scope \"%s\" is longer than %d MB as text; pg_dump writes each row in one piece of at most 1 GB.",
						   IdemKeyForMessage(key), IdemKeyForMessage(scope),
						   IDEM_MAX_RESPONSE_TEXT / (1024 * 1024)),
				 errhint("Store a reference to the body, or a digest of it, instead.")));
}

/* The same for a recovery point */
void
IdemCheckRecoveryPoint(text *recovery_point, text *key, text *scope)
{
	if (toast_raw_datum_size(PointerGetDatum(recovery_point)) > IDEM_MAX_RECOVERY_POINT)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("recovery point is too large to store"),
				 errdetail("The recovery point for key \"%s\" in scope \"%s\" is longer than %d MB.",
						   IdemKeyForMessage(key), IdemKeyForMessage(scope),
						   IDEM_MAX_RECOVERY_POINT / (1024 * 1024)),
				 errhint("Store a reference to the state, or a digest of it, instead.")));
}

/*
 * idem_row_storable(response, recovery_point): idempotency_keys' CHECK
 * constraint, so that a role writing the table directly cannot store what
 * the functions refuse (a row pg_dump could not write).
 */
PG_FUNCTION_INFO_V1(idem_row_storable);
Datum
idem_row_storable(PG_FUNCTION_ARGS)
{
	if (!PG_ARGISNULL(0) && ResponseTooLong(PG_GETARG_DATUM(0)))
		PG_RETURN_BOOL(false);
	if (!PG_ARGISNULL(1) &&
		toast_raw_datum_size(PG_GETARG_DATUM(1)) > IDEM_MAX_RECOVERY_POINT)
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(true);
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
