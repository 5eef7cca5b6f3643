/*-------------------------------------------------------------------------
 *
 * idempotency.h
 *	  Declarations shared by the idempotency extension's source files.
 *
 * The extension keeps one row per (scope, key) in idempotency_keys and
 * reaches that table only through SPI with saved plans (store.c), so that
 * it also works where the table is a shell over shards (Citus).
 *
 *-------------------------------------------------------------------------
 */
#ifndef IDEMPOTENCY_H
#define IDEMPOTENCY_H

#include "fmgr.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "utils/elog.h"
#include "utils/numeric.h"

/*
 * SQLSTATEs of our own, class "IK" (implementation-defined classes start
 * with I..Z).  README.md lists them with their HTTP mapping.
 */
#define ERRCODE_IDEM_REQUEST_MISMATCH	MAKE_SQLSTATE('I','K','0','0','1')
#define ERRCODE_IDEM_STALE_TOKEN		MAKE_SQLSTATE('I','K','0','0','2')
#define ERRCODE_IDEM_NOT_PROCESSING		MAKE_SQLSTATE('I','K','0','0','3')
#define ERRCODE_IDEM_KEY_NOT_FOUND		MAKE_SQLSTATE('I','K','0','0','4')
#define ERRCODE_IDEM_TOKEN_REQUIRED		MAKE_SQLSTATE('I','K','0','0','5')
#define ERRCODE_IDEM_ROW_SECURITY_MISSING	MAKE_SQLSTATE('I','K','0','0','6')

/*
 * A write that took longer than this (its plan already made) was held up,
 * by a lock or a slow moment, and the times it wrote are moved forward to
 * count from after it (IdemRestampIfWaited): a lease is never shorter than
 * asked by more.
 */
#ifndef IDEM_STAMP_SLACK_USECS	/* bench/profile.sh sets it for callgrind */
#define IDEM_STAMP_SLACK_USECS	INT64CONST(10000)
#endif

/* idempotency.stale_policy values */
typedef enum IdemStalePolicy
{
	IDEM_STALE_RECLAIM,
	IDEM_STALE_HOLD
} IdemStalePolicy;

/* GUCs (idempotency.c) */
extern int	idem_lease_seconds;
extern int	idem_retention_seconds;
extern int	idem_max_key_length;
extern int	idem_stale_policy;

/* Status of a key row, as the saved SELECT reports it */
typedef enum IdemStatus
{
	IDEM_PROCESSING = 0,
	IDEM_COMPLETED = 1,
	IDEM_FAILED = 2
} IdemStatus;

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
	IDEM_PARAM_STAMPED,			/* timestamptz: the time a write was stamped with */
	IDEM_PARAM_SHIFT,			/* float8: seconds its times move forward */
	IDEM_NUM_PARAMS
} IdemParam;

typedef struct IdemArgs
{
	Datum		value[IDEM_NUM_PARAMS];
	bool		isnull[IDEM_NUM_PARAMS];
	uint32		given;			/* bit (1 << p) set: parameter p was set */
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

/* statements.c */
extern const char *IdemStatementText(IdemStmt stmt, bool due_at);

/* store.c */
extern Oid	IdemNamespaceOf(FunctionCallInfo fcinfo);
extern TupleDesc IdemResultDesc(FunctionCallInfo fcinfo);
extern Datum IdemStatusValue(Oid typid, IdemStatus status);
extern Oid	IdemKeysRelid(Oid nspid);
extern bool IdemKeysHaveDueAt(Oid nspid);
extern bool IdemKeyLockFunctionExists(Oid nspid);
extern int	IdemPlanOptions(Oid nspid);
extern int	IdemRunPlan(SPIPlanPtr plan, Datum *values, const char *nulls,
						bool read_only, long count);
/* exported: bench/floor's rules floor calls them (load_external_function) */
extern PGDLLEXPORT int IdemPinSearchPath(void);
extern PGDLLEXPORT void IdemUnpinSearchPath(int pin);
extern int	IdemConnect(void);
extern void IdemFinish(int pin);
extern bool IdemRlsApplies(Oid nspid);
extern int64 IdemNextToken(Oid nspid);
extern TimestampTz IdemTimePlus(TimestampTz t, Interval *iv);
extern bool IdemRestampIfWaited(Oid nspid, text *scope, text *key, int64 token,
								TimestampTz stamped);
extern double IdemEpochSeconds(TimestampTz t);
extern MemoryContext IdemCacheContext(void);
typedef void (*IdemSubxactBody) (void *arg);
extern int	IdemRunInSubtransaction(IdemSubxactBody body, void *arg,
									const int *caught);
extern int	IdemExecute(IdemStmt stmt, Oid nspid, const IdemArgs *args,
						bool read_only, long count);
extern void IdemPrepare(IdemStmt stmt, Oid nspid);
extern int	IdemExecuteOn(IdemStmt stmt, const char *relation,
						  const IdemArgs *args);
extern void IdemReadRow(IdemRow *row, MemoryContext mcxt);
extern void IdemValidateKey(text *key, const char *what);
extern void IdemGetKeyArgs(FunctionCallInfo fcinfo, int keyarg, int scopearg,
						   text **key, text **scope);
extern char *IdemKeyForMessage(text *key);
extern void IdemRememberClaim(text *scope, text *key, int64 token);
extern bool IdemRecallClaim(text *scope, text *key, int64 *token);
extern Interval *IdemSecondsInterval(int seconds);
extern void IdemCheckInterval(Interval *iv, const char *what, TimestampTz now,
							  text *key, text *scope);
extern int	IdemErrdetailKey(text *key, text *scope);
extern void IdemCheckResponse(Datum response, text *key, text *scope);
extern void IdemCheckRecoveryPoint(text *recovery_point, text *key, text *scope);

/* claim.c: columns of idem_claim's (and idem_execute's) result */
enum
{
	CLAIM_OUTCOME,
	CLAIM_TOKEN,
	CLAIM_STATUS,
	CLAIM_RESPONSE_CODE,
	CLAIM_RESPONSE,
	CLAIM_RETRY_AFTER,
	CLAIM_RECOVERY_POINT,
	IDEM_CLAIM_NCOLUMNS
};

/* The checked arguments of a claim */
typedef struct IdemClaimArgs
{
	text	   *key;
	text	   *scope;
	bytea	   *hash;			/* NULL when no request was given */
	Interval   *lease;
	Interval   *retention;
	bool		wait;
	bool		probe;			/* IDEM_OUTCOME_NONE, writing nothing, if no row */
	Oid			nspid;
	TimestampTz now;			/* the time the claim is made at */
} IdemClaimArgs;

extern void IdemClaimArgsFrom(FunctionCallInfo fcinfo, const char *fname,
							  int keyarg, int requestarg, int scopearg,
							  Interval *lease, Interval *retention, bool wait,
							  IdemClaimArgs *a);
/* What a claim answers (idem_claim's outcome column) */
typedef enum IdemOutcome
{
	IDEM_OUTCOME_NONE = -1,		/* a probe found no row */
	IDEM_OUTCOME_NEW,
	IDEM_OUTCOME_REPLAY,
	IDEM_OUTCOME_IN_PROGRESS,
	IDEM_OUTCOME_RECLAIMED,
	IDEM_OUTCOME_STALE,
	IDEM_NUM_OUTCOMES
} IdemOutcome;

extern IdemOutcome IdemClaim(IdemClaimArgs *a, TupleDesc desc, Datum *values,
							 bool *nulls);
extern const char *IdemOutcomeName(IdemOutcome outcome);
extern bool IdemLockKey(IdemClaimArgs *a, bool wait);
extern void IdemClaimInit(void);

#include "citus/citus.h"

/* hash.c */
extern PGDLLEXPORT bytea *IdemHashJsonb(Datum jsonb);	/* also bench/floor's */
extern int64 IdemKeyLockId(text *scope, text *key);
extern Size IdemNumericTextLength(Numeric num);

/* expire.c */
typedef struct IdemExpireResult
{
	int64		expired;		/* stale processing rows made takeover-ready */
	int64		deleted;		/* rows past expires_at deleted */
	int64		rekeyed;		/* rows given their next due time */
} IdemExpireResult;

extern int	IdemExpireBatch(Oid nspid, TimestampTz now, int batch_size,
							IdemExpireResult *result);


/* stats.c: cluster-wide counters in shared memory (needs preloading) */
typedef enum IdemStat
{
	IDEM_STAT_CLAIM_NEW,
	IDEM_STAT_CLAIM_REPLAY,
	IDEM_STAT_CLAIM_IN_PROGRESS,
	IDEM_STAT_CLAIM_RECLAIMED,
	IDEM_STAT_CLAIM_STALE,
	IDEM_STAT_MISMATCH,
	IDEM_STAT_COMPLETE,
	IDEM_STAT_FAIL,
	IDEM_STAT_STALE_TOKEN,
	IDEM_STAT_EXPIRED,			/* stale leases expired (worker or idem_expire) */
	IDEM_STAT_DELETED,			/* rows past expires_at deleted */
	IDEM_STAT_WORKER_PASSES,
	IDEM_STAT_WORKER_ERRORS,
	IDEM_NUM_STATS
} IdemStat;

extern Size IdemStatsShmemSize(void);
extern void IdemStatsShmemAttach(void);
extern void IdemStatsAdd(IdemStat stat, int64 n);
extern void IdemStatsBatch(int64 rows);
extern void IdemStatsWorkerPass(TimestampTz end);

/* worker.c */
extern void IdemWorkerInit(void);
extern Size IdemWorkerShmemSize(void);
extern void IdemWorkerShmemAttach(void);

/* shmem.c */
extern void IdemShmemInit(void);

/* guard.c */
extern void IdemGuardInit(void);

#endif							/* IDEMPOTENCY_H */
