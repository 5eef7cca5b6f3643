/*-------------------------------------------------------------------------
 *
 * store.c
 *	  Access to idempotency_keys: the statements' texts, their saved SPI
 *	  plans and parameters, and running them (row.c reads their rows;
 *	  input.c checks what callers pass).
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
#include "common.h"
#include "store.h"
#include "citus/citus.h"

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
	[IDEM_PARAM_MAX_ATTEMPTS] = {"max_attempts", INT4OID},
	[IDEM_PARAM_KEYS] = {"keys", TEXTARRAYOID},
	[IDEM_PARAM_TOKENS] = {"tokens", INT8ARRAYOID},
	[IDEM_PARAM_HASHES] = {"hashes", BYTEAARRAYOID},
};

/* Parameters one statement uses at most */
#define STMT_MAX_PARAMS 10

/*
 * A saved plan and the parameters its $1, $2, ... stand for.  A statement
 * that names a lease end or an expiry (:lease_end, :lease_end_epoch,
 * :expires_at, or :now_epoch, from which complete and fail count the
 * retention) writes times: it runs only with a :now from the call's stamp,
 * which then notes the rows it wrote (stamp.c).
 */
typedef struct SavedStmt
{
	SPIPlanPtr	plan;
	int			nparams;
	IdemParam	param[STMT_MAX_PARAMS];
	bool		stamped;		/* it writes times */
	bool		new_token;		/* it names :new_token */
	bool		custom;			/* planned for each run's values (CustomOnly) */
} SavedStmt;

/* Saved plans, valid for the schema they were prepared for */
static Oid	plans_nspid = InvalidOid;
static SavedStmt saved[IDEM_NUM_STMTS];

/*
 * The table, and its shape (which release's columns it has): both looked
 * up again after a relcache invalidation of the table (ALTER EXTENSION ...
 * UPDATE changes it, DROP EXTENSION drops it), and then the saved plans
 * are made again from the other texts if its shape changed.
 */
static Oid	keys_relid = InvalidOid;
static bool keys_shape_known = false;
static IdemKeysShape keys_shape = IDEM_KEYS_040;
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
	return IdemStatementText(stmt, keys_shape);
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
 * Refuse to run when idempotency_keys' row level security is not what
 * idempotency_row_security (0.4.0 on) records, which is what pg_dump keeps:
 * - policies are recorded but the table's row level security is off, or
 *   one of them is missing from it: a restore that did not put them back
 *   (see idem_restore_row_security) would let every tenant read every
 *   other's keys;
 * - row level security is on and a policy of the table is not recorded,
 *   or differs from the one recorded: the next dump and restore would lose
 *   it or bring back the old one, silently.
 * Compared as idem_save_row_security() records them: the expressions as
 * pg_get_expr writes them with only pg_catalog on the search path and the
 * other settings of its SET clauses (deparse_settings), whatever the
 * caller's.  A
 * Citus worker node's table has the coordinator's policies and records
 * none (the coordinator's do): there only the first is checked.
 * Checked when the table's relcache entry is new, which ENABLE and DISABLE
 * ROW LEVEL SECURITY and every policy change make it, and again at each
 * call while it fails.  Called inside SPI.
 */
static const char *const deparse_settings[][2] = {
	{"search_path", "pg_catalog, pg_temp"},
	{"quote_all_identifiers", "off"},
	{"standard_conforming_strings", "on"},
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
	{"TimeZone", "UTC"},
	{"extra_float_digits", "1"},
	{"bytea_output", "hex"},
	{"lc_monetary", "C"},
};

static void
CheckRowSecurityInPlace(Oid nspid, Oid relid)
{
	Oid			saved = get_relname_relid("idempotency_row_security", nspid);
	HeapTuple	tup;
	bool		enabled;
	char	   *sql;
	Datum		arg = ObjectIdGetDatum(relid);
	int			level;
	int			rc;
	char	   *policy;
	char	   *kind;

	if (!OidIsValid(saved))
		return;					/* a schema before 0.4.0 */
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	enabled = ((Form_pg_class) GETSTRUCT(tup))->relrowsecurity;
	ReleaseSysCache(tup);
	if (enabled)
		/* each policy recorded or on the table that is not both, alike */
		sql = psprintf("WITH n AS (SELECT p.polname AS policy, p.polpermissive AS permissive,"
					   " CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'"
					   " WHEN 'd' THEN 'DELETE' ELSE 'ALL' END AS command,"
					   " ARRAY(SELECT CASE WHEN r OPERATOR(pg_catalog.=) 0 THEN 'public'::pg_catalog.name"
					   " ELSE a.rolname END FROM pg_catalog.unnest(p.polroles) AS r"
					   " LEFT JOIN pg_catalog.pg_roles a ON a.oid OPERATOR(pg_catalog.=) r) AS roles,"
					   " pg_catalog.pg_get_expr(p.polqual, p.polrelid) AS using_expr,"
					   " pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid) AS check_expr"
					   " FROM pg_catalog.pg_policy p WHERE p.polrelid OPERATOR(pg_catalog.=) $1)"
					   " SELECT COALESCE(r.policy, n.policy),"
					   " CASE WHEN n.policy IS NULL THEN 'missing' WHEN r.policy IS NULL THEN 'unrecorded'"
					   " ELSE 'differs' END"
					   " FROM %s.idempotency_row_security r FULL JOIN n ON r.policy OPERATOR(pg_catalog.=) n.policy"
					   " WHERE n.policy IS NULL%s"
					   " ORDER BY n.policy IS NULL DESC, 1 LIMIT 1",
					   quote_identifier(get_namespace_name(nspid)),
					   IdemCitusNodeGroup(PG_INT32_MAX) > 0 ? "" :
					   " OR r.policy IS NULL"
					   " OR (r.permissive, r.command, r.roles, r.using_expr, r.check_expr)"
					   " IS DISTINCT FROM (n.permissive, n.command, n.roles, n.using_expr, n.check_expr)");
	else
		/* any policy recorded */
		sql = psprintf("SELECT policy, 'off' FROM %s.idempotency_row_security WHERE $1 IS NOT NULL LIMIT 1",
					   quote_identifier(get_namespace_name(nspid)));
	level = NewGUCNestLevel();
	for (size_t i = 0; i < lengthof(deparse_settings); i++)
		(void) set_config_option(deparse_settings[i][0], deparse_settings[i][1],
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	rc = SPI_execute_with_args(sql, 1, (Oid[]) {OIDOID}, &arg, NULL, true, 1);
	AtEOXact_GUC(true, level);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read idempotency_row_security");
	if (SPI_processed == 0)
		return;
	policy = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	kind = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	if (strcmp(kind, "off") == 0 || strcmp(kind, "missing") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_ROW_SECURITY_MISSING),
				 errmsg("row level security of idempotency_keys is not in place"),
				 kind[0] == 'm' ?
				 errdetail("Policy \"%s\" is recorded in idempotency_row_security but missing from idempotency_keys.",
						   policy) :
				 errdetail("Policies are recorded in idempotency_row_security, but row level security is disabled on idempotency_keys."),
				 errhint("As the table's owner, run SELECT idem_restore_row_security(); or, to run without the policies, delete their rows from idempotency_row_security.")));
	ereport(ERROR,
			(errcode(ERRCODE_IDEM_ROW_SECURITY_MISSING),
			 errmsg("row level security of idempotency_keys is not recorded"),
			 kind[0] == 'u' ?
			 errdetail("Policy \"%s\" of idempotency_keys is not recorded in idempotency_row_security, so pg_dump would not keep it.",
					   policy) :
			 errdetail("Policy \"%s\" of idempotency_keys differs from the one recorded in idempotency_row_security, so a restore would bring back the recorded one.",
					   policy),
			 errhint("As the table's owner, run SELECT idem_save_row_security(); after every change of the policies, in the same transaction.")));
}

/*
 * How the statements we keep (ours, and idem_execute's caller's) are
 * planned: as PostgreSQL chooses, or a custom plan for every execution
 * where citus.h says so (IdemCitusCustomPlansOnly).
 */
static int
PlanOptionsNow(void)
{
	return IdemCitusCustomPlansOnly() ? CURSOR_OPT_CUSTOM_PLAN : 0;
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
 * SPI_execute_plan of a plan prepared with custom_only's cursor options.
 * The setting plan_cache_mode = force_generic_plan outranks a plan's own
 * CURSOR_OPT_CUSTOM_PLAN; where only custom plans will do it is set to
 * force_custom_plan for the execution, so that no role or database setting
 * undoes that.
 */
static int
RunPlan(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only,
		long count, bool custom_only)
{
	int			level = -1;
	int			rc;

	if (plan_cache_mode == PLAN_CACHE_MODE_FORCE_GENERIC_PLAN && custom_only)
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
 * SPI_execute_plan of a plan prepared with IdemPlanOptions: custom plans
 * only where citus.h says so (IdemCitusCustomPlansOnly).
 */
int
IdemRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only,
			long count)
{
	return RunPlan(plan, values, nulls, read_only, count, IdemCitusCustomPlansOnly());
}

/*
 * The shape of idempotency_keys in schema nspid.  When it changes, or
 * Citus comes or goes (IdemPlanOptions), the saved plans are made again.
 */
static IdemKeysShape
KeysShape(Oid nspid)
{
	if (!keys_shape_known || plans_nspid != nspid)
	{
		Oid			relid = IdemKeysRelid(nspid);
		IdemKeysShape shape = get_attnum(relid, "attempts") != InvalidAttrNumber ? IDEM_KEYS_040 :
			get_attnum(relid, "due_at") != InvalidAttrNumber ? IDEM_KEYS_030 : IDEM_KEYS_020;
		int			options = PlanOptionsNow();

		CheckRowSecurityInPlace(nspid, relid);

		if (shape != keys_shape || options != plans_options)
			FreePlans();
		keys_shape = shape;
		keys_have_lock_function =
			OidIsValid(LookupFuncName(list_make2(makeString(get_namespace_name(nspid)),
												 makeString("idem_key_lock")),
									  3, (Oid[]) {TEXTOID, TEXTOID, INT4OID}, true));
		plans_options = options;
		/* an invalidation taken in get_attnum cleared keys_relid: ask again next time */
		keys_shape_known = (keys_relid == relid);
	}
	return keys_shape;
}

/* Does idempotency_keys in schema nspid have due_at (0.3.0 on)? */
bool
IdemKeysHaveDueAt(Oid nspid)
{
	return KeysShape(nspid) >= IDEM_KEYS_030;
}

/* Does idempotency_keys in schema nspid count attempts (0.4.0 on)? */
bool
IdemKeysHaveAttempts(Oid nspid)
{
	return KeysShape(nspid) >= IDEM_KEYS_040;
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
	stmt->stamped = false;
	stmt->new_token = false;
	for (int i = 0; i < stmt->nparams; i++)
	{
		IdemParam	param = stmt->param[i];

		stmt->stamped |= param == IDEM_PARAM_LEASE_END ||
			param == IDEM_PARAM_LEASE_END_EPOCH ||
			param == IDEM_PARAM_EXPIRES_AT || param == IDEM_PARAM_NOW_EPOCH;
		stmt->new_token |= param == IDEM_PARAM_NEW_TOKEN;
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
 * Is statement stmt planned for each run's values?  IDEM_STMT_RESTAMP
 * filters its rows by token = ANY (:tokens), which a generic plan tests by
 * reading the array from its start for every row: 10,000 keys cost 10^8
 * comparisons (1.5 s and more, in a backend that had restamped five times
 * before).  A custom plan has the array as a constant, which PostgreSQL
 * 14 and later look up in a hash table; its planning is linear, and the
 * statement runs only after a wait.
 */
static bool
CustomOnly(IdemStmt stmt)
{
	return stmt == IDEM_STMT_RESTAMP;
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
		s->custom = CustomOnly(stmt);
		plan = SPI_prepare_cursor(sql, s->nparams, types,
								  plans_options | (s->custom ? CURSOR_OPT_CUSTOM_PLAN : 0));
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		s->plan = plan;
	}
	return s;
}

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
	return (IdemCitusNodeGroup(TOKEN_MAX_GROUP) << TOKEN_GROUP_SHIFT) | n;
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
 * May the statement run with its scope written into its text, where the
 * key's shard is on this node (IdemCitusHoldKeyShard)?  The key's read (a
 * claim's, idem_execute's, idem_lookup's) and its complete: parsed once
 * per call there, they cost less than a saved plan.  Elsewhere, and on a
 * plain server, the saved plan is cheaper.
 */
static bool
ScopeInlinable(IdemStmt stmt)
{
	return stmt == IDEM_STMT_SELECT || stmt == IDEM_STMT_LOOKUP ||
		stmt == IDEM_STMT_COMPLETE;
}

/*
 * Run a statement with its scope written into its text as a quoted
 * literal (ScopeInlinable), parsed and planned for this call only.
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
 * transaction ends (IdemCitusHoldKeyShard), then runs through Citus.  A
 * statement that writes times runs only stamped, and its stamp notes the
 * rows it wrote (stamp.c).
 */
int
IdemExecute(IdemStmt stmt, Oid nspid, const IdemArgs *args, bool read_only,
			long count)
{
	const SavedStmt *s = SavedPlan(stmt, nspid);
	text	   *scope = ScopeArg(args);
	bool		here;
	Datum		values[STMT_MAX_PARAMS];
	char		nulls[STMT_MAX_PARAMS];
	int			rc;

	if (s->stamped)
		IdemStampCheck(stmt, args);
	here = scope != NULL &&
		IdemCitusHoldKeyShard(nspid, IdemKeysRelid(nspid), scope);
	if (here && ScopeInlinable(stmt))
	{
		rc = InlinedScopeRun(stmt, nspid, args, read_only, count);
		if (rc < 0)
			elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
	}
	else
	{
		BindArgs(stmt, s, args, values, nulls);
		rc = RunPlan(s->plan, values, nulls, read_only, count,
					 s->custom || IdemCitusCustomPlansOnly());
		if (rc < 0)
			elog(ERROR, "SPI_execute_plan failed: %s", SPI_result_code_string(rc));
	}
	if (s->stamped)
		IdemStampWrote(stmt, args, s->new_token, SPI_processed);
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

	if (s.stamped)
		elog(ERROR, "statement %d writes times: it runs stamped, through IdemExecute", (int) stmt);

	ParamTypes(&s, types);
	BindArgs(stmt, &s, args, values, nulls);
	rc = SPI_execute_with_args(sql, s.nparams, types, values, nulls, false, 0);
	if (rc < 0)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(rc));
	return (int) SPI_processed;
}
