/*-------------------------------------------------------------------------
 *
 * input.c
 *	  Checks of what callers pass: keys and scopes, leases and retentions,
 *	  responses and recovery points (and the table's CHECK on the last two).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "common/sha2.h"
#include "commands/sequence.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "miscadmin.h"
#include "utils/array.h"
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
#include "settings.h"
#include "input.h"
#include "hash.h"

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
 * The longest recovery point, in bytes (its text's, without the varlena
 * header): a marker of how far a request got.  With a
 * response's text at most IDEM_MAX_RESPONSE_TEXT (which COPY's escapes
 * can double) and a 32-byte request hash, a row's COPY line stays far
 * below 1 GB.
 */
#define IDEM_MAX_RECOVERY_POINT	(1024 * 1024)

/* Below this many bytes (uncompressed) a jsonb's text is surely short enough */
#define IDEM_RESPONSE_CHECK_BYTES	8192

/*
 * Above IDEM_RESPONSE_CHECK_BYTES, the deepest a response may hold an item
 * (the number of containers around it, as jsonpath's .** levels count
 * them): the SQL edition counts a response's text through jsonpath, which
 * copies a key's value for each level above it, and refuses one nested
 * deeper; both refuse the same rows, so that a dump of either restores
 * into the other (one row its CHECK refused would fail the COPY of the
 * whole table).
 */
#define IDEM_MAX_RESPONSE_DEPTH	16

/*
 * The largest response, in bytes uncompressed: the SQL edition's walk holds
 * arrays of a response's items, which jsonpath builds of at most 2^24
 * (each item takes a 4-byte entry, so a response within this has fewer).
 * Refused by both, for the same reason as the depth.
 */
#define IDEM_MAX_RESPONSE_BYTES	(64 * 1024 * 1024)

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
 * Would the response's text form be longer than IDEM_MAX_RESPONSE_TEXT
 * less extra bytes, or is it above IDEM_RESPONSE_CHECK_BYTES and nested
 * deeper than IDEM_MAX_RESPONSE_DEPTH, or larger than
 * IDEM_MAX_RESPONSE_BYTES?  Counted without writing it, and
 * without counting further than that.
 */
static bool
ResponseTooLong(Datum response, Size extra)
{
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	Size		len = 0;
	int			open = 0;		/* containers around the next item */

	if (toast_raw_datum_size(response) <= IDEM_RESPONSE_CHECK_BYTES)
		return false;
	if (toast_raw_datum_size(response) > IDEM_MAX_RESPONSE_BYTES)
		return true;
	jb = DatumGetJsonbP(response);
	if (JB_ROOT_IS_SCALAR(jb))
		open = -1;				/* a scalar's pseudo-array is no level */
	it = JsonbIteratorInit(&jb->root);
	while (len <= IDEM_MAX_RESPONSE_TEXT - extra &&
		   (tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		if ((tok == WJB_BEGIN_ARRAY || tok == WJB_BEGIN_OBJECT || tok == WJB_VALUE || tok == WJB_ELEM) &&
			open > IDEM_MAX_RESPONSE_DEPTH)
			return true;
		if (tok == WJB_BEGIN_ARRAY || tok == WJB_BEGIN_OBJECT)
			open++;
		else if (tok == WJB_END_ARRAY || tok == WJB_END_OBJECT)
			open--;
		len += 2;				/* brackets, ", ", ": " */
		if (tok == WJB_KEY || tok == WJB_VALUE || tok == WJB_ELEM)
			len += ScalarTextBound(&v);
	}
	return len > IDEM_MAX_RESPONSE_TEXT - extra;
}

/*
 * Can the response be stored inside another whose own text adds at most
 * extra bytes (IdemCheckResponse would accept the whole)?
 */
bool
IdemResponseFitsIn(Datum response, Size extra)
{
	return !ResponseTooLong(response, extra);
}

/*
 * Refuse a response whose text form would be longer than
 * IDEM_MAX_RESPONSE_TEXT: a row pg_dump cannot write would break every
 * tenant's backup.
 */
void
IdemCheckResponse(Datum response, text *key, text *scope)
{
	if (ResponseTooLong(response, 0))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("response is too large to store"),
				 errdetail("The response for key \"%s\" in scope \"%s\" is longer than %d MB as text or %d MB as jsonb, or larger than %d kB and nested more than %d levels deep; pg_dump writes each row in one piece of at most 1 GB.",
						   IdemKeyForMessage(key), IdemKeyForMessage(scope),
						   IDEM_MAX_RESPONSE_TEXT / (1024 * 1024), IDEM_MAX_RESPONSE_BYTES / (1024 * 1024),
						   IDEM_RESPONSE_CHECK_BYTES / 1024, IDEM_MAX_RESPONSE_DEPTH),
				 errhint("Store a reference to the body, or a digest of it, instead.")));
}

/* The same for a recovery point */
void
IdemCheckRecoveryPoint(text *recovery_point, text *key, text *scope)
{
	if (toast_raw_datum_size(PointerGetDatum(recovery_point)) - VARHDRSZ > IDEM_MAX_RECOVERY_POINT)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("recovery point is too large to store"),
				 errdetail("The recovery point for key \"%s\" in scope \"%s\" is longer than %d MB.",
						   IdemKeyForMessage(key), IdemKeyForMessage(scope),
						   IDEM_MAX_RECOVERY_POINT / (1024 * 1024)),
				 errhint("Store a reference to the state, or a digest of it, instead.")));
}

/*
 * idem_row_storable(response, recovery_point, request_hash):
 * idempotency_keys' CHECK constraint, so that a role writing the table
 * directly cannot store what the functions refuse (a row pg_dump could not
 * write, a request hash that is not a SHA-256).  One function call: the
 * executor reads a CHECK's expression from its text at every INSERT and
 * UPDATE, so the shorter that text, the cheaper each write.
 */
PG_FUNCTION_INFO_V1(idem_row_storable);
Datum
idem_row_storable(PG_FUNCTION_ARGS)
{
	if (!PG_ARGISNULL(0) && ResponseTooLong(PG_GETARG_DATUM(0), 0))
		PG_RETURN_BOOL(false);
	if (!PG_ARGISNULL(1) &&
		toast_raw_datum_size(PG_GETARG_DATUM(1)) - VARHDRSZ > IDEM_MAX_RECOVERY_POINT)
		PG_RETURN_BOOL(false);
	/* (a build of 0.4.0 before its release declared it with two arguments) */
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2) &&
		VARSIZE_ANY_EXHDR(PG_GETARG_BYTEA_PP(2)) != PG_SHA256_DIGEST_LENGTH)
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

/*
 * The elements of array argument argno of a batch call (what names it in
 * errors): one-dimensional, at most IDEM_BATCH_MAX_KEYS of them.
 */
int
IdemArrayArg(FunctionCallInfo fcinfo, int argno, const char *what, Oid elemtype,
			 Datum **elems, bool **nulls)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(argno);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			n;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what)));
	if (ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array)) > IDEM_BATCH_MAX_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a batch holds at most %d keys", IDEM_BATCH_MAX_KEYS),
				 errdetail("%s has %d elements.", what,
						   ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array))),
				 errhint("Split the keys into several batches.")));
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(array, elemtype, typlen, typbyval, typalign, elems, nulls, &n);
	return n;
}

/*
 * Keys in byte order, the order a batch claims and completes them in, so
 * that two batches sharing keys take their locks in the same order.
 */
int
IdemCompareKeys(text *x, text *y)
{
	int			lx = VARSIZE_ANY_EXHDR(x);
	int			ly = VARSIZE_ANY_EXHDR(y);
	int			c = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(lx, ly));

	if (c != 0)
		return c;
	return (lx > ly) - (lx < ly);
}
