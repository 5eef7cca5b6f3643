/*-------------------------------------------------------------------------
 *
 * statements.c
 *	  The texts of the statements on idempotency_keys (store.c prepares and
 *	  runs them): for the table of 0.3.0 on, and those that differ on a
 *	  table of 0.1.0 / 0.2.0, which the library serves between the package's
 *	  upgrade and ALTER EXTENSION idempotency UPDATE.
 *
 * A text names the table as %1$s and the extension's schema as %2$s, and
 * its parameters as :name (IdemParam); every operator and function is
 * schema-qualified, so a text means the same whatever the search_path.
 * The columns a text returns (RETURNING token, status, ...) are read by
 * name (row.c, claim.c, batch.c, record.c): a text is the one place that
 * says which, in any order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"
#include "common.h"
#include "store.h"

/*
 * The table, schema-qualified (or, for expiry of a distributed table, one of
 * its shards)
 */
#define KEYS	"%1$s"
/* The extension's schema, quoted (only in statements run on the table) */
#define NSP		"%2$s"
#define EQ		" OPERATOR(pg_catalog.=) "
#define NE		" OPERATOR(pg_catalog.<>) "
#define LE		" OPERATOR(pg_catalog.<=) "
#define GT		" OPERATOR(pg_catalog.>) "
#define GE		" OPERATOR(pg_catalog.>=) "
#define WHERE_KEY	" WHERE scope" EQ ":scope AND key" EQ ":key"
#define AND_TOKEN	" AND token" EQ ":token"

/*
 * "now + the retention this row keeps", where epoch is now in Unix epoch
 * seconds: a processing row keeps expires_at = locked_until + retention.  Every
 * function in it is IMMUTABLE, unlike timestamptz + interval (STABLE), which a
 * distributed table refuses over columns in an UPDATE; and it is exact to the
 * microsecond (float8 epoch seconds carry about 0.2 us until the year 2242,
 * and to_timestamp rounds to the microsecond).
 */
#define SHIFTED_EXPIRY(epoch) \
	"pg_catalog.to_timestamp(" epoch " OPERATOR(pg_catalog.+) pg_catalog.date_part('epoch'," \
	" expires_at OPERATOR(pg_catalog.-) locked_until))"

/*
 * column moved forward by seconds (float8); infinities and NULL stay.
 * IMMUTABLE, as SHIFTED_EXPIRY, for a distributed table: the epoch is taken of
 * an interval (date_part of a timestamptz is STABLE).
 */
#define SHIFTED(seconds, column) \
	"CASE WHEN " column " IN ('infinity', '-infinity') THEN " column \
	" ELSE pg_catalog.to_timestamp(pg_catalog.date_part('epoch', " column \
	" OPERATOR(pg_catalog.-) '1970-01-01 00:00:00+00'::pg_catalog.timestamptz)" \
	" OPERATOR(pg_catalog.+) " seconds ") END"

/*
 * The seconds from a row's last write, which stamped it with its
 * updated_at, to :now (stamp.c); IMMUTABLE, as SHIFTED needs.
 */
#define SINCE_WRITTEN \
	"pg_catalog.date_part('epoch', :now OPERATOR(pg_catalog.-) updated_at)"

/* IDEM_STMT_RESTAMP's text; set is what else the table's shape moves */
#define RESTAMP(set) \
	"UPDATE " KEYS " SET locked_until = " SHIFTED(SINCE_WRITTEN, "locked_until") "," \
	" expires_at = " SHIFTED(SINCE_WRITTEN, "expires_at") "," set \
	" created_at = CASE WHEN created_at" EQ "updated_at THEN :now ELSE created_at END," \
	" updated_at = :now" \
	" WHERE scope" EQ ":scope AND key" EQ "ANY (:keys) AND token" EQ "ANY (:tokens)" \
	" RETURNING token, locked_until"

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

/*
 * A row whose own times never come (written by hand: expires_at infinity,
 * a lease to infinity) is due at a time no pass reaches, not at infinity,
 * where it would be taken, locked and left again by every pass under
 * reclaim, and stand in front of the stale claims held there.  Far enough
 * below the end of timestamptz that a restamp's shift cannot overflow it.
 */
#define NEVER_DUE_AT "'9999-12-31 00:00:00+00'::pg_catalog.timestamptz"

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
	" locked_until = NULL, updated_at = :now, due_at = LEAST(k.expires_at, " NEVER_DUE_AT ") FROM due" \
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
 * A row's next due time, when it needs nothing now: after now (never, for
 * times that never come), or infinity for a stale claim held (and for rows
 * written by hand with times that give no later one).  A row re-keyed to
 * where it was is not written, nor counted as changed, so a pass ends.
 */
#define EXPIRE_NEXT \
	"CASE WHEN status" NE "'processing' AND expires_at" GT ":now THEN LEAST(expires_at, " NEVER_DUE_AT ")" \
	" WHEN status" EQ "'processing' AND locked_until" GT ":now AND expires_at" GT ":now" \
	" THEN LEAST(locked_until, expires_at, " NEVER_DUE_AT ")" \
	" ELSE " HELD_DUE_AT " END"

/*
 * Take over a failed-retryable key, or a processing one whose lease ran
 * out (when :reclaim; one without a lease end, written by hand, as
 * DecideClaim and expiry count it); set is what else the table's shape
 * writes.  :token is the token seen, so a claim that changed the row in
 * between makes this a no-op.
 */
#define TAKEOVER_WHERE \
	WHERE_KEY AND_TOKEN " AND expires_at" GT ":now" \
	" AND ((status" EQ "'failed' AND retryable)" \
	" OR (:reclaim AND status" EQ "'processing' AND (locked_until IS NULL OR locked_until" LE ":now)))"
#define TAKEOVER(set) \
	"UPDATE " KEYS " SET status = 'processing', token = :new_token," \
	" locked_until = :lease_end, expires_at = :expires_at," set \
	" retryable = true, response_code = NULL, response = NULL, updated_at = :now" \
	TAKEOVER_WHERE " RETURNING token, status, recovery_point"

/* Start afresh on a row past expires_at (a processing one when :reclaim) */
#define RENEW(set) \
	"UPDATE " KEYS " SET status = 'processing', token = :new_token," \
	" locked_until = :lease_end, expires_at = :expires_at," set \
	" created_at = :now, updated_at = :now, request_hash = :request_hash, retryable = true," \
	" response_code = NULL, response = NULL, recovery_point = NULL" \
	WHERE_KEY AND_TOKEN " AND expires_at" LE ":now" \
	" AND (:reclaim OR status" NE "'processing')" \
	" RETURNING token, status"

/*
 * The rows an operator may settle (idem_resolve): processing ones, and
 * those the attempts limit made final (IDEM_STMT_EXHAUST), whose response
 * says so.
 */
#define AND_SETTLEABLE \
	" AND status" NE "'completed' AND (status" NE "'failed' OR (NOT retryable" \
	" AND response OPERATOR(pg_catalog.->>) 'error'" EQ "'attempts_exhausted'))"

static const char *const stmt_sql[IDEM_NUM_STMTS] = {
	/*
	 * The whole row, one value: executor start-up builds a result type of
	 * one column instead of nine, at every execution; IdemReadRow takes the
	 * columns it needs by name.
	 */
	[IDEM_STMT_SELECT] =
	"SELECT k FROM " KEYS " AS k" WHERE_KEY,

	/*
	 * Every value is computed in C and passed as a parameter (no nextval(), no
	 * time arithmetic in SQL), so that on a distributed table the planner can
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
	[IDEM_STMT_TAKEOVER] = TAKEOVER(" due_at = :lease_end, attempts = attempts OPERATOR(pg_catalog.+) 1,"),

	/* Start afresh on a row past expires_at (a processing one when :reclaim) */
	[IDEM_STMT_RENEW] = RENEW(" due_at = :lease_end, attempts = 1,"),

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
	WHERE_KEY AND_SETTLEABLE,

	[IDEM_STMT_RESOLVE_RELEASE] =
	"DELETE FROM " KEYS WHERE_KEY AND_SETTLEABLE,

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
	 * The key's lock on a distributed table, taken before a claim writes the
	 * key's row, held to the end of the transaction, by idem_key_lock() on the
	 * node that holds the key's shard (claim.c).  wait => false only tries it.
	 * Read through the key's row (count(*) always yields one row) so that the
	 * statement runs where the row lives (keylock.c).
	 */
	[IDEM_STMT_LOCK_KEY] =
	"SELECT " NSP ".idem_key_lock(:scope, :key, 0), pg_catalog.count(*)"
	" FROM " KEYS WHERE_KEY,

	[IDEM_STMT_TRY_LOCK_KEY] =
	"SELECT " NSP ".idem_key_lock(:scope, :key, 1), pg_catalog.count(*)"
	" FROM " KEYS WHERE_KEY,

	/*
	 * wait => false in a transaction that holds its most key locks already (keylock.c):
	 * is the key's lock free?  Taken and released at once.
	 */
	[IDEM_STMT_PROBE_LOCK_KEY] =
	"SELECT " NSP ".idem_key_lock(:scope, :key, 2), pg_catalog.count(*)"
	" FROM " KEYS WHERE_KEY,

	/* wait => false, before updating a row: lock it, or learn who holds it */
	[IDEM_STMT_TRY_LOCK_ROW] =
	"SELECT token FROM " KEYS WHERE_KEY " FOR NO KEY UPDATE SKIP LOCKED",

	/*
	 * The rows a call wrote, moved forward after it waited (stamp.c): each
	 * row's lease end and expiry by the time since its own write stamped
	 * them (its updated_at), so that they count from :now, and created_at
	 * too where that write set it.  due_at moves with them, which keeps it
	 * at or before the lease end and expires_at.  A key noted under a token
	 * it no longer has (written again by the call, or left out of a
	 * batch's INSERT) matches nothing.
	 */
	[IDEM_STMT_RESTAMP] = RESTAMP(" due_at = " SHIFTED(SINCE_WRITTEN, "due_at") ","),

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

	/*
	 * A takeover past the attempts limit makes the key final instead:
	 * failed, not retryable, under a new token (a holder whose lease ran
	 * out is fenced off), with a response that says so (claim.c builds
	 * it), kept for the claim's retention.  Guarded as TAKEOVER is, and
	 * by the count it read.
	 */
	[IDEM_STMT_EXHAUST] =
	"UPDATE " KEYS " SET status = 'failed', retryable = false, token = :new_token,"
	" locked_until = NULL, response = :response, updated_at = :now,"
	" expires_at = :expires_at, due_at = :expires_at"
	TAKEOVER_WHERE " AND attempts" GE ":max_attempts",

	/*
	 * A batch's keys, new ones written processing in one statement
	 * (batch.c), their locks already taken; a key that has a row is left
	 * out (ON CONFLICT), for a claim of its own.  Returns the tokens of the
	 * rows written.
	 */
	[IDEM_STMT_INSERT_MANY] =
	"INSERT INTO " KEYS " (scope, key, status, token, locked_until,"
	" created_at, updated_at, expires_at, request_hash, due_at)"
	" SELECT :scope, k.key, 'processing', k.token, :lease_end,"
	" :now, :now, :expires_at, k.hash, :lease_end"
	" FROM ROWS FROM (pg_catalog.unnest(:keys), pg_catalog.unnest(:tokens),"
	" pg_catalog.unnest(:hashes)) AS k(key, token, hash)"
	" ON CONFLICT (scope, key) DO NOTHING RETURNING token",
};

/*
 * The statements that differ on a table of schema 0.3.0 (no attempts
 * column): takeovers and renewals count nothing.
 */
static const char *const stmt_sql_v03[IDEM_NUM_STMTS] = {
	[IDEM_STMT_TAKEOVER] = TAKEOVER(" due_at = :lease_end,"),
	[IDEM_STMT_RENEW] = RENEW(" due_at = :lease_end,"),
};

/*
 * The statements that differ on a table of schema 0.1.0 / 0.2.0 (no due_at
 * column, the expires_at and partial lease indexes): the library serves
 * such a database between the package's upgrade and ALTER EXTENSION
 * idempotency UPDATE.  Expiry's re-keying has no counterpart there.
 */
static const char *const stmt_sql_v02[IDEM_NUM_STMTS] = {
	[IDEM_STMT_RESTAMP] = RESTAMP(""),

	[IDEM_STMT_INSERT] =
	"INSERT INTO " KEYS " (scope, key, status, token, locked_until,"
	" created_at, updated_at, expires_at, request_hash)"
	" VALUES (:scope, :key, 'processing', :new_token, :lease_end,"
	" :now, :now, :expires_at, :request_hash)"
	" ON CONFLICT (scope, key) DO NOTHING RETURNING token, status",

	[IDEM_STMT_TAKEOVER] = TAKEOVER(""),
	[IDEM_STMT_RENEW] = RENEW(""),

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

/* The text of statement stmt for a table of this shape */
const char *
IdemStatementText(IdemStmt stmt, IdemKeysShape shape)
{
	if (shape == IDEM_KEYS_020 && stmt_sql_v02[stmt] != NULL)
		return stmt_sql_v02[stmt];
	if (shape <= IDEM_KEYS_030 && stmt_sql_v03[stmt] != NULL)
		return stmt_sql_v03[stmt];
	if (shape < IDEM_KEYS_040 && (stmt == IDEM_STMT_EXHAUST || stmt == IDEM_STMT_INSERT_MANY))
		elog(ERROR, "statement %d needs the table of 0.4.0", (int) stmt);
	if (stmt_sql[stmt] == NULL)
		elog(ERROR, "statement %d has no text for this table's shape", (int) stmt);
	return stmt_sql[stmt];
}
