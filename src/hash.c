/*-------------------------------------------------------------------------
 *
 * hash.c
 *	  Request hashing: idem_request_hash() and the hash idem_claim compares.
 *
 * A JSON request is hashed in a canonical form, so equal documents hash
 * equal whatever their key order, spacing or number spelling:
 *	- compact JSON text, no white space;
 *	- object keys in jsonb's own order (shorter keys first, then bytewise),
 *	  duplicate keys already resolved by jsonb (the last one wins);
 *	- strings escaped as jsonb prints them;
 *	- numbers in numeric_normalize() form (1.0, 1.00 and 1e0 are all "1")
 *	  when their first digit stands for 10^-32 to 10^32; further out, in
 *	  scientific form: the digits without trailing zeros, the first before
 *	  a point, then "e" and the exponent (1e131000, -2.5e-40).  Written out
 *	  in full, such a number is up to 131,000 characters for the few bytes
 *	  it is stored in, and a request of them costs gigabytes to hash.
 * The hash is SHA-256 of that text in the database encoding.  The bytea and
 * text variants hash the bytes as given.
 *
 * Where PostgreSQL is built with OpenSSL (Debian's is), SHA-256 is OpenSSL's,
 * called directly with the algorithm fetched once per backend: PostgreSQL's
 * cryptohash API, which calls the same code, makes OpenSSL 3 look the
 * algorithm up by name at every init, which costs more than hashing a
 * short request does.  Elsewhere, the cryptohash API.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/sha2.h"
#ifdef USE_OPENSSL
#include <openssl/evp.h>
#else
#include "common/cryptohash.h"
#endif
#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "compat.h"
#include "common.h"
#include "hash.h"

PG_FUNCTION_INFO_V1(idem_request_hash_jsonb);
PG_FUNCTION_INFO_V1(idem_request_hash_bytea);
PG_FUNCTION_INFO_V1(idem_request_hash_text);

static void
ReportHashFailure(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("could not compute SHA-256 hash of the request")));
}

#ifdef USE_OPENSSL
/*
 * OpenSSL's SHA-256, fetched once per backend (OpenSSL 3: an explicit
 * fetch, kept for the backend's life; before 3, a static table).
 */
static const EVP_MD *
Sha256Md(void)
{
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	static EVP_MD *md = NULL;

	if (md == NULL)
		md = EVP_MD_fetch(NULL, "SHA256", NULL);
	return md;
#else
	return EVP_sha256();
#endif
}

/* SHA-256 of len bytes into digest (PG_SHA256_DIGEST_LENGTH bytes) */
static void
Sha256(const char *data, size_t len, uint8 *digest)
{
	const EVP_MD *md = Sha256Md();
	unsigned int digest_len = 0;

	if (md == NULL ||
		EVP_Digest(data, len, digest, &digest_len, md, NULL) != 1 ||
		digest_len != PG_SHA256_DIGEST_LENGTH)
		ReportHashFailure();
}
#else
/* SHA-256 of len bytes into digest, by PostgreSQL's cryptohash API */
static void
Sha256(const char *data, size_t len, uint8 *digest)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_cryptohash_final(ctx, digest, PG_SHA256_DIGEST_LENGTH) < 0)
	{
		pg_cryptohash_free(ctx);
		ReportHashFailure();
	}
	pg_cryptohash_free(ctx);
}
#endif

/*
 * SHA-256 of len bytes as a palloc'd bytea.
 */
static bytea *
Sha256Bytea(const char *data, size_t len)
{
	bytea	   *result = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);

	Sha256(data, len, (uint8 *) VARDATA(result));
	SET_VARSIZE(result, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	return result;
}

/*
 * Append a comma unless this item opens its container or follows a key.
 */
static void
AppendSeparator(StringInfo buf)
{
	if (buf->len > 0)
	{
		char		last = buf->data[buf->len - 1];

		if (last != '[' && last != '{' && last != ':')
			appendStringInfoChar(buf, ',');
	}
}

/*
 * numeric's stored form (its on-disk format, which pg_upgrade keeps): a
 * header word, a weight word in the long form, then base-10000 digits with
 * no leading or trailing zero digit (none for zero).  numeric.c keeps its
 * macros for it to itself.
 */
#define NUMBER_SIGN_MASK		0xC000
#define NUMBER_NEG				0x4000
#define NUMBER_SHORT			0x8000
#define NUMBER_SPECIAL			0xC000
#define NUMBER_SHORT_SIGN		0x2000
#define NUMBER_SHORT_WEIGHT_SIGN 0x0040
#define NUMBER_SHORT_WEIGHT_MASK 0x003F

/* Decimal exponents written out in full (numeric_normalize's form) */
#define NUMBER_PLAIN_EXPONENT	32

/* A numeric as stored: sign, weight, display scale, base-10000 digits */
typedef struct StoredNumber
{
	bool		special;		/* NaN or an infinity */
	bool		neg;
	int			weight;
	int			dscale;
	int			ndigits;
	const char *digits;			/* int16 each, maybe unaligned */
} StoredNumber;

#define NUMBER_SHORT_DSCALE_MASK	0x1F80
#define NUMBER_SHORT_DSCALE_SHIFT	7
#define NUMBER_DSCALE_MASK			0x3FFF

static void
DecodeNumber(Numeric num, StoredNumber *n)
{
	const char *data = VARDATA_ANY(num);
	int			len = VARSIZE_ANY_EXHDR(num);
	uint16		header;

	memcpy(&header, data, sizeof(uint16));
	memset(n, 0, sizeof(StoredNumber));
	if ((header & NUMBER_SIGN_MASK) == NUMBER_SPECIAL)
	{
		n->special = true;
		return;
	}
	if (header & NUMBER_SHORT)
	{
		n->neg = (header & NUMBER_SHORT_SIGN) != 0;
		n->weight = (header & NUMBER_SHORT_WEIGHT_MASK) -
			((header & NUMBER_SHORT_WEIGHT_SIGN) ? NUMBER_SHORT_WEIGHT_MASK + 1 : 0);
		n->dscale = (header & NUMBER_SHORT_DSCALE_MASK) >> NUMBER_SHORT_DSCALE_SHIFT;
		data += sizeof(uint16);
		len -= sizeof(uint16);
	}
	else
	{
		int16		w;

		n->neg = (header & NUMBER_SIGN_MASK) == NUMBER_NEG;
		n->dscale = header & NUMBER_DSCALE_MASK;
		memcpy(&w, data + sizeof(uint16), sizeof(int16));
		n->weight = w;
		data += 2 * sizeof(uint16);
		len -= 2 * sizeof(uint16);
	}
	n->ndigits = len / (int) sizeof(int16);
	n->digits = data;
}

/* The i-th base-10000 digit */
static int
NumberDigit(const StoredNumber *n, int i)
{
	int16		d;

	memcpy(&d, n->digits + i * sizeof(int16), sizeof(int16));
	return d;
}

/* Decimal digits of a base-10000 digit (1 to 4; 1 for 0) */
static int
DigitWidth(int d)
{
	return d >= 1000 ? 4 : d >= 100 ? 3 : d >= 10 ? 2 : 1;
}

/*
 * The length of numeric_out's text of num (what jsonb_out writes for a
 * number), from its stored form: without writing it.
 */
Size
IdemNumericTextLength(Numeric num)
{
	StoredNumber n;

	DecodeNumber(num, &n);
	if (n.special)
		return strlen(numeric_normalize(num));
	return (n.neg ? 1 : 0) +
		(n.ndigits == 0 || n.weight < 0 ? 1 :
		 (Size) n.weight * 4 + DigitWidth(NumberDigit(&n, 0))) +
		(n.dscale > 0 ? 1 + (Size) n.dscale : 0);
}

/*
 * Append a JSON number in canonical form (see the top of the file), in
 * time and memory proportional to its stored digits.
 */
static void
AppendNumber(StringInfo buf, Numeric num)
{
	StoredNumber n;
	char	   *digits;
	int			len = 0;
	int			exponent;

	DecodeNumber(num, &n);
	if (n.special)
	{
		/* NaN and infinities: no JSON number is one */
		appendStringInfoString(buf, numeric_normalize(num));
		return;
	}
	if (n.ndigits == 0)
	{
		appendStringInfoChar(buf, '0');
		return;
	}

	/* the decimal digits, the first one nonzero, trailing zeros dropped */
	digits = palloc(n.ndigits * 4 + 1);
	for (int i = 0; i < n.ndigits; i++)
		len += sprintf(digits + len, i == 0 ? "%d" : "%04d", NumberDigit(&n, i));
	exponent = n.weight * 4 + DigitWidth(NumberDigit(&n, 0)) - 1;	/* of the first */
	while (len > 1 && digits[len - 1] == '0')
		len--;

	if (n.neg)
		appendStringInfoChar(buf, '-');
	if (exponent > NUMBER_PLAIN_EXPONENT || exponent < -NUMBER_PLAIN_EXPONENT)
	{
		appendStringInfoChar(buf, digits[0]);
		if (len > 1)
		{
			appendStringInfoChar(buf, '.');
			appendBinaryStringInfo(buf, digits + 1, len - 1);
		}
		appendStringInfo(buf, "e%d", exponent);
	}
	else if (exponent >= 0)
	{
		/* integer part, padded with zeros; then the fraction, if any */
		int			whole = exponent + 1;

		appendBinaryStringInfo(buf, digits, Min(len, whole));
		for (int i = len; i < whole; i++)
			appendStringInfoChar(buf, '0');
		if (len > whole)
		{
			appendStringInfoChar(buf, '.');
			appendBinaryStringInfo(buf, digits + whole, len - whole);
		}
	}
	else
	{
		appendStringInfoString(buf, "0.");
		for (int i = -1; i > exponent; i--)
			appendStringInfoChar(buf, '0');
		appendBinaryStringInfo(buf, digits, len);
	}
	pfree(digits);
}

/*
 * Append a scalar in canonical form.
 */
static void
AppendScalar(StringInfo buf, JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			appendStringInfoString(buf, "null");
			break;
		case jbvBool:
			appendStringInfoString(buf, v->val.boolean ? "true" : "false");
			break;
		case jbvNumeric:
			AppendNumber(buf, v->val.numeric);
			break;
		case jbvString:
			escape_json(buf, pnstrdup(v->val.string.val, v->val.string.len));
			break;
		default:
			elog(ERROR, "unexpected jsonb value type %d", (int) v->type);
	}
}

/*
 * The canonical text of a jsonb document.
 */
static void
CanonicalJson(StringInfo buf, Jsonb *jb)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (JB_ROOT_IS_SCALAR(jb))
	{
		if (!JsonbExtractScalar(&jb->root, &v))
			elog(ERROR, "could not extract scalar from jsonb");
		AppendScalar(buf, &v);
		return;
	}

	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		switch (tok)
		{
			case WJB_BEGIN_ARRAY:
				AppendSeparator(buf);
				appendStringInfoChar(buf, '[');
				break;
			case WJB_END_ARRAY:
				appendStringInfoChar(buf, ']');
				break;
			case WJB_BEGIN_OBJECT:
				AppendSeparator(buf);
				appendStringInfoChar(buf, '{');
				break;
			case WJB_END_OBJECT:
				appendStringInfoChar(buf, '}');
				break;
			case WJB_KEY:
				AppendSeparator(buf);
				AppendScalar(buf, &v);
				appendStringInfoChar(buf, ':');
				break;
			case WJB_VALUE:
			case WJB_ELEM:
				AppendSeparator(buf);
				AppendScalar(buf, &v);
				break;
			default:
				elog(ERROR, "unexpected jsonb iterator token %d", (int) tok);
		}
	}
}

/*
 * The request hash idem_claim stores and compares, for a jsonb Datum.
 */
bytea *
IdemHashJsonb(Datum jsonb)
{
	Jsonb	   *jb = DatumGetJsonbP(jsonb);
	StringInfoData buf;
	bytea	   *result;

	initStringInfo(&buf);
	CanonicalJson(&buf, jb);
	result = Sha256Bytea(buf.data, buf.len);
	pfree(buf.data);
	return result;
}

/* idem_request_hash(jsonb) */
Datum
idem_request_hash_jsonb(PG_FUNCTION_ARGS)
{
	PG_RETURN_BYTEA_P(IdemHashJsonb(PG_GETARG_DATUM(0)));
}

/* idem_request_hash(bytea) */
Datum
idem_request_hash_bytea(PG_FUNCTION_ARGS)
{
	bytea	   *data = PG_GETARG_BYTEA_PP(0);

	PG_RETURN_BYTEA_P(Sha256Bytea(VARDATA_ANY(data), VARSIZE_ANY_EXHDR(data)));
}

/* idem_request_hash(text) */
Datum
idem_request_hash_text(PG_FUNCTION_ARGS)
{
	text	   *data = PG_GETARG_TEXT_PP(0);

	PG_RETURN_BYTEA_P(Sha256Bytea(VARDATA_ANY(data), VARSIZE_ANY_EXHDR(data)));
}

/*
 * Key lock ids.
 *
 * A claim's key lock (claim.c) is an advisory lock on a 64-bit id of
 * (scope, key), and pg_locks shows every lock's id to every role.  With an
 * id any role could compute, a tenant could find a key in its own scope
 * whose id is another tenant's key's, and hold it to stall that tenant's
 * claims.  So the id is SipHash-2-4 (a keyed function: without the key,
 * no one can compute an id or find two inputs that share one) under a
 * secret of this server: SHA-256 of a label and the random nonce initdb
 * wrote to pg_control (the one SCRAM's mock authentication uses), which no
 * SQL function shows.  Every backend of the server computes the same ids;
 * a standby, which takes no key lock, has the same nonce.
 */
#define KEY_LOCK_LABEL "idempotency key lock"

#define ROTL64(x, b)	(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND \
	do { \
		v0 += v1; v1 = ROTL64(v1, 13); v1 ^= v0; v0 = ROTL64(v0, 32); \
		v2 += v3; v3 = ROTL64(v3, 16); v3 ^= v2; \
		v0 += v3; v3 = ROTL64(v3, 21); v3 ^= v0; \
		v2 += v1; v1 = ROTL64(v1, 17); v1 ^= v2; v2 = ROTL64(v2, 32); \
	} while (0)

/* Little-endian 64-bit word at p */
static uint64
Le64(const unsigned char *p)
{
	uint64		w = 0;

	for (int i = 7; i >= 0; i--)
		w = (w << 8) | p[i];
	return w;
}

/* SipHash-2-4 of len bytes under the 128-bit key k0, k1 */
static uint64
SipHash24(uint64 k0, uint64 k1, const unsigned char *data, size_t len)
{
	uint64		v0 = k0 ^ UINT64CONST(0x736f6d6570736575);
	uint64		v1 = k1 ^ UINT64CONST(0x646f72616e646f6d);
	uint64		v2 = k0 ^ UINT64CONST(0x6c7967656e657261);
	uint64		v3 = k1 ^ UINT64CONST(0x7465646279746573);
	size_t		whole = len - len % 8;
	uint64		last = (uint64) len << 56;

	for (size_t i = 0; i < whole; i += 8)
	{
		uint64		m = Le64(data + i);

		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t i = whole; i < len; i++)
		last |= (uint64) data[i] << (8 * (i - whole));
	v3 ^= last;
	SIPROUND;
	SIPROUND;
	v0 ^= last;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/*
 * The key lock id of (scope, key): SipHash-2-4 under this server's secret
 * of the scope's length, the scope and the key.
 */
int64
IdemKeyLockId(text *scope, text *key)
{
	static bool have_secret = false;
	static uint64 k0,
				k1;
	uint32		scope_len = VARSIZE_ANY_EXHDR(scope);
	size_t		key_len = VARSIZE_ANY_EXHDR(key);
	size_t		len = sizeof(uint32) + scope_len + key_len;
	unsigned char *buf;
	uint64		id;

	if (!have_secret)
	{
		char		seed[sizeof(KEY_LOCK_LABEL) + MOCK_AUTH_NONCE_LEN];
		uint8		digest[PG_SHA256_DIGEST_LENGTH];

		memcpy(seed, KEY_LOCK_LABEL, sizeof(KEY_LOCK_LABEL));
		memcpy(seed + sizeof(KEY_LOCK_LABEL), GetMockAuthenticationNonce(), MOCK_AUTH_NONCE_LEN);
		Sha256(seed, sizeof(seed), digest);
		k0 = Le64(digest);
		k1 = Le64(digest + 8);
		have_secret = true;
	}

	buf = palloc(len);
	memcpy(buf, &scope_len, sizeof(uint32));
	memcpy(buf + sizeof(uint32), VARDATA_ANY(scope), scope_len);
	memcpy(buf + sizeof(uint32) + scope_len, VARDATA_ANY(key), key_len);
	id = SipHash24(k0, k1, buf, len);
	pfree(buf);
	return (int64) id;
}
