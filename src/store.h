/*-------------------------------------------------------------------------
 *
 * store.h
 *	  The statements on idempotency_keys (statements.c), running them
 *	  (store.c), reading their rows (row.c), and the SPI session around them
 *	  (session.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_STORE_H
#define IDEMPOTENCY_STORE_H

#include "executor/spi.h"
#include "common.h"
#include "session.h"

/* Saved statements (store.c) */
typedef enum IdemStmt
{
	IDEM_STMT_SELECT,
	IDEM_STMT_INSERT,
	IDEM_STMT_TAKEOVER,
	IDEM_STMT_RENEW,
	IDEM_STMT_COMPLETE,
	IDEM_STMT_FAIL,
	IDEM_STMT_HEARTBEAT,
	IDEM_STMT_RELEASE,
	IDEM_STMT_CHECKPOINT,
	IDEM_STMT_RESOLVE_FAIL,
	IDEM_STMT_RESOLVE_RELEASE,
	IDEM_STMT_LOOKUP,
	IDEM_STMT_EXPIRE_STALE,		/* 0.2.0's table only; then IDEM_STMT_EXPIRE_DUE */
	IDEM_STMT_EXPIRE_DELETE,	/* 0.2.0's table only */
	IDEM_STMT_INSERT_COMPLETED,
	IDEM_STMT_LOCK_KEY,
	IDEM_STMT_TRY_LOCK_KEY,
	IDEM_STMT_PROBE_LOCK_KEY,
	IDEM_STMT_TRY_LOCK_ROW,
	IDEM_STMT_RESTAMP,
	IDEM_STMT_EXPIRE_DUE,
	IDEM_STMT_EXPIRE_DUE_RECLAIM,
	IDEM_STMT_EXHAUST,			/* 0.4.0's table on */
	IDEM_STMT_INSERT_MANY,		/* 0.4.0's table on */
	IDEM_NUM_STMTS
} IdemStmt;

/*
 * A key row as read by IDEM_STMT_SELECT.  Pass-by-reference values are
 * copied into the caller's memory context, so they outlive SPI_finish.
 */
typedef struct IdemRow
{
	bool		found;
	Datum		status;			/* idempotency_status enum value */
	IdemStatus	status_code;
	bytea	   *request_hash;	/* NULL when none was stored */
	bool		response_code_null;
	int32		response_code;
	Datum		response;		/* jsonb, or 0 when NULL */
	int64		token;
	bool		locked_until_null;
	TimestampTz locked_until;
	text	   *recovery_point; /* NULL when none */
	bool		retryable;
	TimestampTz expires_at;
	int32		attempts;		/* 0 on a table before 0.4.0 (no such column) */
} IdemRow;

/*
 * The parameters of the statements on idempotency_keys, by name.  A
 * statement's text names them as :name (store.c gives each its type); a
 * caller sets the ones it has in an IdemArgs, and running a statement with
 * one of its parameters not set is an error.  A new column is one entry
 * here and the :name in the statements that write it.
 */
typedef enum IdemParam
{
	IDEM_PARAM_SCOPE,			/* text */
	IDEM_PARAM_KEY,				/* text */
	IDEM_PARAM_REQUEST_HASH,	/* bytea, may be null */
	IDEM_PARAM_NOW,				/* timestamptz */
	IDEM_PARAM_NOW_EPOCH,		/* now in Unix epoch seconds, float8 */
	IDEM_PARAM_LEASE_END,		/* timestamptz */
	IDEM_PARAM_LEASE_END_EPOCH, /* the same in Unix epoch seconds, float8 */
	IDEM_PARAM_EXPIRES_AT,		/* timestamptz */
	IDEM_PARAM_TOKEN,			/* int8: the token the row must have */
	IDEM_PARAM_NEW_TOKEN,		/* int8: the token written */
	IDEM_PARAM_RESPONSE_CODE,	/* int4, may be null */
	IDEM_PARAM_RESPONSE,		/* jsonb, may be null */
	IDEM_PARAM_RETRYABLE,		/* bool */
	IDEM_PARAM_RECLAIM,			/* bool: stale_policy is reclaim */
	IDEM_PARAM_RECOVERY_POINT,	/* text, may be null */
	IDEM_PARAM_BATCH_SIZE,		/* int8: rows at most */
	IDEM_PARAM_MAX_ATTEMPTS,	/* int4: attempts allowed */
	IDEM_PARAM_KEYS,			/* text[]: a batch's keys */
	IDEM_PARAM_TOKENS,			/* int8[]: their new tokens */
	IDEM_PARAM_HASHES,			/* bytea[]: their request hashes, NULL elements for none */
	IDEM_NUM_PARAMS
} IdemParam;

struct IdemStamp;

typedef struct IdemArgs
{
	Datum		value[IDEM_NUM_PARAMS];
	bool		isnull[IDEM_NUM_PARAMS];
	uint32		given;			/* bit (1 << p) set: parameter p was set */
	struct IdemStamp *stamp;	/* the stamp :now came from (IdemStampArgs) */
} IdemArgs;

/* Set a parameter */
static inline void
IdemArg(IdemArgs *args, IdemParam p, Datum value)
{
	args->value[p] = value;
	args->isnull[p] = false;
	args->given |= UINT32_C(1) << p;
}

/* Set a parameter to NULL */
static inline void
IdemArgNull(IdemArgs *args, IdemParam p)
{
	args->value[p] = (Datum) 0;
	args->isnull[p] = true;
	args->given |= UINT32_C(1) << p;
}

/* Set a parameter to a pass-by-reference value, NULL for SQL NULL */
static inline void
IdemArgPtr(IdemArgs *args, IdemParam p, const void *ptr)
{
	if (ptr == NULL)
		IdemArgNull(args, p);
	else
		IdemArg(args, p, PointerGetDatum(ptr));
}

/* Arguments holding a key and its scope, nothing else yet */
static inline IdemArgs
IdemKeyArgs(text *scope, text *key)
{
	IdemArgs	args = {.given = 0};

	IdemArg(&args, IDEM_PARAM_SCOPE, PointerGetDatum(scope));
	IdemArg(&args, IDEM_PARAM_KEY, PointerGetDatum(key));
	return args;
}

/* The shape of idempotency_keys: the release whose columns it has */
typedef enum IdemKeysShape
{
	IDEM_KEYS_020,				/* 0.1.0 and 0.2.0: no due_at */
	IDEM_KEYS_030,				/* due_at, no attempts */
	IDEM_KEYS_040				/* attempts */
} IdemKeysShape;

/* statements.c */
extern const char *IdemStatementText(IdemStmt stmt, IdemKeysShape shape);

/* store.c */
extern Oid	IdemNamespaceOf(FunctionCallInfo fcinfo);
extern TupleDesc IdemResultDesc(FunctionCallInfo fcinfo);
extern Oid	IdemKeysRelid(Oid nspid);
extern bool IdemKeysHaveDueAt(Oid nspid);
extern bool IdemKeysHaveAttempts(Oid nspid);
extern bool IdemKeyLockFunctionExists(Oid nspid);
extern int	IdemPlanOptions(Oid nspid);
extern int	IdemRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
						bool read_only, long count);
extern bool IdemRlsApplies(Oid nspid);
extern int64 IdemNextToken(Oid nspid);
extern TimestampTz IdemTimePlus(TimestampTz t, Interval *iv);
extern double IdemEpochSeconds(TimestampTz t);
extern int	IdemExecute(IdemStmt stmt, Oid nspid, const IdemArgs *args,
						bool read_only, long count);
extern void IdemPrepare(IdemStmt stmt, Oid nspid);
extern int	IdemExecuteOn(IdemStmt stmt, const char *relation,
						  const IdemArgs *args);

/*
 * A call's stamp (stamp.c): every lease and expiry the call writes counts
 * from after its last wait.  Set up with IdemStampInit; IdemStampArgs
 * gives each write its time; IdemStampEnd ends the call.
 */
typedef struct IdemStamp
{
	MemoryContext mcxt;			/* where the lists of rows grow */
	TimestampTz now;			/* the time handed out last */
	/* the span: since the first row still pending was stamped */
	TimestampTz since;
	int64		cpu_since;		/* this process's CPU time then, us */
	long		sleeps_since;	/* its voluntary context switches then */
	bool		counted;		/* getrusage counts context switches */
	bool		waited;			/* IdemStampWaited said so */
	/* the span the write stamped last starts, if it writes */
	bool		restart;
	TimestampTz next_since;
	int64		next_cpu;
	long		next_sleeps;
	/* the rows written in the span: key, token; one scope */
	text	   *scope;
	text	   *only_key;		/* every row is this key's; NULL: not so */
	int			nrows;
	int			maxrows;
	Datum	   *keys;
	Datum	   *tokens;
	Datum		inline_keys[2];
	Datum		inline_tokens[2];
} IdemStamp;

/* stamp.c */
extern void IdemStampInit(IdemStamp *s);
extern TimestampTz IdemStampArgs(IdemStamp *s, IdemStmt stmt, Oid nspid, IdemArgs *args);
extern void IdemStampCheck(IdemStmt stmt, const IdemArgs *args);
extern void IdemStampWrote(IdemStmt stmt, const IdemArgs *args, bool new_token,
						   uint64 processed);
extern bool IdemStampWaited(IdemStamp *s);
extern bool IdemStampEnd(IdemStamp *s, Oid nspid);

/* row.c */
extern void IdemReadRow(IdemRow *row, MemoryContext mcxt);
extern Datum IdemStatusValue(Oid typid, IdemStatus status);

#endif							/* IDEMPOTENCY_STORE_H */
