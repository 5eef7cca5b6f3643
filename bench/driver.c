/*
 * bench/driver.c: the benchmark's load driver.  One driver for every variant,
 * so that ratios between variants measure the variants, not the drivers.
 *
 * N client threads, each with its own libpq connection (and, for the Redis
 * variant, its own hiredis connection), no pipelining: every request waits for
 * its answers before the next is sent.  Statements are prepared once per
 * connection (PQprepare / PQexecPrepared, like pgbench -M prepared).  Each
 * request's latency is measured with CLOCK_MONOTONIC in microseconds and kept,
 * so p50 / p99 are exact over the measured window.  WAL is the difference of
 * pg_current_wal_insert_lsn() between the start and the end of the window
 * (all of the server's WAL in that time), divided by the requests completed.
 *
 *   driver --pg CONNINFO [--redis HOST:PORT] --variant V --mode M
 *          [--clients 8] [--seconds 8] [--warmup 1] [--keys N] [--tag T]
 *          [--requests N]   (each client stops after N requests instead of
 *                            after --seconds; bench/profile.sh uses it)
 *          [--text-args]    (execute: both statement arguments as text, the
 *                            amount cast in the statement: $5::text and
 *                            VALUES ($1, $2::int); the SQL edition's
 *                            idem_execute takes VARIADIC anycompatiblearray,
 *                            so one type, where the C build takes "any")
 *   driver --redis HOST:PORT --fill-redis N      (completed keys for replays)
 *
 * Variants (request = what one API request costs the service):
 *   floor        INSERT INTO payments ... RETURNING id                 1 round trip
 *   on_conflict  INSERT INTO payments_uk ... ON CONFLICT DO NOTHING    1
 *   plpgsql      BEGIN; ref_claim; INSERT; ref_complete; COMMIT        5 (replay: ref_claim, 1)
 *   redis        SET lock NX PX 10000; INSERT; SET response EX 86400   3 (replay: GET, 1)
 *   claim        BEGIN; idem_claim; INSERT; idem_complete; COMMIT      5 (replay: idem_claim, 1)
 *   execute      idem_execute(key, request, scope, 201, 'INSERT ...')  1
 *   limit        the physical limit: one statement that inserts the payment
 *                and a bare key row (scope, key, request hash, response) in
 *                limit_keys, no checks; the SHA-256 of the request is
 *                computed here, by the client                           1
 *                (replay: SELECT request_hash, response by primary key, 1;
 *                the client compares the hash)
 *   claim_only   idem_claim alone, autocommit (bench/profile.sh: the claim's
 *                own cost; a new key is left processing)               1
 *   spi_floor    the SPI floor (bench/floor/idem_floor.c): idem_execute
 *                reduced to its statements run through SPI (read the key's
 *                row in limit_keys, insert the payment, insert the key row),
 *                the hash computed here as for the limit                1
 *                (replay: the same call finds the row, 1)
 *   spi_floor_explicit  the explicit pattern's floor: BEGIN;
 *                spi_floor_claim (one INSERT ... ON CONFLICT); INSERT;
 *                spi_floor_complete (one UPDATE); COMMIT                5
 *   spi_floor_rules  the SPI floor under the rules: the request sent as
 *                jsonb, hashed and (replay) checked by the server,
 *                search_path pinned around the floor's own statements   1
 * Modes:
 *   new          every request a fresh random UUID key
 *   replay       every request a duplicate of one of --keys completed keys
 *                (key_of(i) below; run.sh loads them)
 *   contention   all clients race 4 live keys that change every 50
 *                requests; then exactly-once is checked: one payment per
 *                key, and every answer a client got names that payment.
 *                (not limit, claim_only or the spi_floor variants: a
 *                duplicate of limit's one statement fails on limit_keys'
 *                primary key, and the floors check nothing.)
 *
 * Output, one line for run.sh, then notes:
 *   RESULT variant mode requests tps p50_ms p99_ms wal_bytes_per_req errors
 *          check n_new n_replay n_409 server_cpu_us_per_req client_cpu_us_per_req
 *          other_cores
 * Server CPU (--server-pids: the postmaster and redis-server) is read from
 * /proc over the measured window: the servers' processes, their children
 * (backends, autovacuum, the expiry worker) and the children they reaped.
 * other_cores: CPU the rest of the machine used meanwhile (from /proc/stat,
 * in cores), to show how noisy the measurement was.  Before it, one line
 * BACKENDS pid ... (each client's server process, for bench/profile.sh).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

#include <libpq-fe.h>
#include <hiredis/hiredis.h>
#include <openssl/evp.h>

#define SCOPE "merchant-42"
#define AMOUNT "3000"
#define CONTENTION_KEYS 4		/* live keys at any time */
#define CONTENTION_PER_KEY 50	/* requests per key before it changes */
#define RETRY_SLEEP_US 1000		/* Redis 409: the client tries again after */
#define REDIS_PREFIX "payment-gateway:idem:"

enum variant { V_FLOOR, V_ON_CONFLICT, V_PLPGSQL, V_REDIS, V_CLAIM, V_EXECUTE, V_LIMIT, V_CLAIM_ONLY,
V_SPI_FLOOR, V_SPI_FLOOR_EXPLICIT, V_SPI_FLOOR_RULES };
enum mode { M_NEW, M_REPLAY, M_CONTENTION };
static const char *variant_names[] = {"floor", "on_conflict", "plpgsql", "redis", "claim", "execute", "limit",
"claim_only", "spi_floor", "spi_floor_explicit", "spi_floor_rules"};
#define N_VARIANTS 11
static const char *mode_names[] = {"new", "replay", "contention"};

static const char *opt_pg = NULL;
static const char *opt_redis = NULL;
static int	opt_text_args = 0;
static const char *opt_tag = "t";
static enum variant opt_variant = V_FLOOR;
static enum mode opt_mode = M_NEW;
static int	opt_clients = 8;
static double opt_seconds = 8;
static double opt_warmup = 1;
static long opt_keys = 10000;
static long opt_requests = 0;	/* > 0: each client stops after this many */
static int	server_pids[8];
static int	n_server_pids = 0;

/* 0: warm-up, 1: measuring, 2: stop */
static atomic_int phase = 0;
static atomic_long contention_counter = 0;
static atomic_int threads_ready = 0;
static atomic_int threads_done = 0;

typedef struct Observation
{
	long		key_index;		/* contention key */
	long		payment_id;		/* id named by the answer, -1 if none */
	int			was_new;
} Observation;

typedef struct Client
{
	int			id;
	pthread_t	thread;
	PGconn	   *pg;
	redisContext *redis;
	uint64_t	rng[2];
	uint32_t   *lat;			/* microseconds, measured window only */
	long		nlat;
	long		cap;
	long		errors;
	long		n_new;
	long		n_replay;
	long		n_409;
	Observation *obs;
	long		nobs;
	long		obscap;
	char		first_error[512];
	int			dead;
} Client;

static Client *clients;

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "driver: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000u + ts.tv_nsec / 1000;
}

/* xorshift128+ */
static uint64_t
rnd(Client *c)
{
	uint64_t	s1 = c->rng[0];
	const uint64_t s0 = c->rng[1];

	c->rng[0] = s0;
	s1 ^= s1 << 23;
	c->rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
	return c->rng[1] + s0;
}

/* a random version-4 UUID, as clients generate Idempotency-Keys */
static void
random_key(Client *c, char *buf)
{
	uint64_t	a = rnd(c),
				b = rnd(c);

	snprintf(buf, 48, "%08" PRIx64 "-%04" PRIx64 "-4%03" PRIx64 "-%04" PRIx64 "-%012" PRIx64,
			 (uint64_t) (a >> 32), (uint64_t) ((a >> 16) & 0xffff), (uint64_t) (a & 0xfff),
			 (uint64_t) (0x8000 | (b >> 48 & 0x3fff)), (uint64_t) (b & 0xffffffffffffULL));
}

/*
 * The i-th pre-completed key (replay mode; bench/run.sh loads the same keys
 * with SQL): UUID-shaped, its first group scattering the keys over the index.
 *   lpad(to_hex((i * 2654435761) % 4294967296), 8, '0') || '-0000-4000-8000-' || lpad(to_hex(i), 12, '0')
 */
static void
key_of(long i, char *buf)
{
	snprintf(buf, 48, "%08" PRIx64 "-0000-4000-8000-%012lx",
			 (uint64_t) (((uint64_t) i * 2654435761ULL) % 4294967296ULL), (unsigned long) i);
}

/*
 * the request body a key is sent with (replays: the same one again):
 * compact, keys in jsonb's order, so that the client's SHA-256 of it (the
 * limit's) is the server's of its canonical form (spi_floor_rules')
 */
static void
request_of(const char *key, char *buf)
{
	snprintf(buf, 160, "{\"amount\":" AMOUNT ",\"currency\":\"TWD\",\"order_id\":\"%s\"}", key);
}

/* the limit's request hash: SHA-256 of the request text, as bytea hex input */
static void
request_hash_hex(const char *req, char *buf)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (!EVP_Digest(req, strlen(req), md, &len, EVP_sha256(), NULL))
		die("SHA-256 failed");
	strcpy(buf, "\\x");
	for (unsigned int i = 0; i < len; i++)
		sprintf(buf + 2 + 2 * i, "%02x", md[i]);
}

/* payment id named by a response: the number after "id": (jsonb or Redis) */
static long
id_in(const char *resp)
{
	const char *p;

	if (resp == NULL || (p = strstr(resp, "\"id\":")) == NULL)
		return -1;
	return strtol(p + 5, NULL, 10);
}

static void
record_error(Client *c, const char *what, const char *msg)
{
	c->errors++;
	if (c->first_error[0] == '\0')
		snprintf(c->first_error, sizeof(c->first_error), "%s: %s", what, msg ? msg : "?");
}

/* run a prepared statement; returns the result if it succeeded, else NULL */
static PGresult *
execp(Client *c, const char *stmt, int n, const char *const *vals)
{
	PGresult   *r = PQexecPrepared(c->pg, stmt, n, vals, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(r);

	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return r;
	record_error(c, stmt, PQresultErrorMessage(r));
	PQclear(r);
	if (PQstatus(c->pg) != CONNECTION_OK)
		c->dead = 1;
	return NULL;
}

static int
simple(Client *c, const char *sql)
{
	PGresult   *r = PQexec(c->pg, sql);
	int			ok = PQresultStatus(r) == PGRES_COMMAND_OK;

	if (!ok)
		record_error(c, sql, PQresultErrorMessage(r));
	PQclear(r);
	if (PQstatus(c->pg) != CONNECTION_OK)
		c->dead = 1;
	return ok;
}

static void
prepare(Client *c, const char *name, const char *sql)
{
	PGresult   *r = PQprepare(c->pg, name, sql, 0, NULL);

	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die("prepare %s: %s", name, PQresultErrorMessage(r));
	PQclear(r);
}

static void
observe(Client *c, long key_index, long payment_id, int was_new)
{
	if (c->nobs == c->obscap)
	{
		c->obscap = c->obscap ? c->obscap * 2 : 4096;
		c->obs = realloc(c->obs, c->obscap * sizeof(Observation));
		if (c->obs == NULL)
			die("out of memory");
	}
	c->obs[c->nobs].key_index = key_index;
	c->obs[c->nobs].payment_id = payment_id;
	c->obs[c->nobs].was_new = was_new;
	c->nobs++;
}

/*
 * The claim/complete patterns (PL/pgSQL reference and idem_claim), 5 round
 * trips for a new key: BEGIN; claim; INSERT payment; complete; COMMIT.
 * A duplicate's claim waits for an uncommitted first claim, then replays:
 * BEGIN; claim; COMMIT.  Returns payment id named, or -1 on error.
 */
static long
do_claim_pattern(Client *c, const char *key, const char *req, int *was_new, const char *claim_stmt,
				 const char *complete_stmt)
{
	const char *cv[3] = {key, req, SCOPE};	/* req: the request, or for a floor its hash */
	PGresult   *r;
	long		id = -1;

	*was_new = 0;
	if (!simple(c, "BEGIN"))
		return -1;
	if ((r = execp(c, claim_stmt, 3, cv)) == NULL)
		goto fail;
	if (strcmp(PQgetvalue(r, 0, 0), "new") == 0)
	{
		const char *iv[2] = {key, AMOUNT};
		char		resp[64];
		const char *kv[3] = {key, resp, SCOPE};

		PQclear(r);
		if ((r = execp(c, "pay", 2, iv)) == NULL)
			goto fail;
		id = atol(PQgetvalue(r, 0, 0));
		PQclear(r);
		snprintf(resp, sizeof(resp), "{\"id\": %ld}", id);
		if ((r = execp(c, complete_stmt, 3, kv)) == NULL)
			goto fail;
		PQclear(r);
		*was_new = 1;
	}
	else if (strcmp(PQgetvalue(r, 0, 0), "replay") == 0)
	{
		id = id_in(PQgetvalue(r, 0, 2));
		PQclear(r);
	}
	else
	{
		record_error(c, "claim", PQgetvalue(r, 0, 0));
		PQclear(r);
		goto fail;
	}
	if (!simple(c, "COMMIT"))
		return -1;
	return id;

fail:
	if (!c->dead)
	{
		PGresult   *rb = PQexec(c->pg, "ROLLBACK");

		PQclear(rb);
	}
	return -1;
}

/* one request; returns the payment id the answer names (-1: none / error) */
static long
one_request(Client *c, const char *key, int *was_new, int *got_answer)
{
	char		req[160];
	PGresult   *r;
	long		id = -1;

	*was_new = 0;
	*got_answer = 1;
	request_of(key, req);

	switch (opt_variant)
	{
		case V_FLOOR:
			{
				const char *v[2] = {key, AMOUNT};

				if ((r = execp(c, "pay", 2, v)) == NULL)
					return -1;
				id = atol(PQgetvalue(r, 0, 0));
				*was_new = 1;
				PQclear(r);
				return id;
			}
		case V_ON_CONFLICT:
			{
				const char *v[2] = {key, AMOUNT};

				if ((r = execp(c, "pay_uk", 2, v)) == NULL)
					return -1;
				if (PQntuples(r) == 1)
				{
					id = atol(PQgetvalue(r, 0, 0));
					*was_new = 1;
				}
				PQclear(r);
				return id;		/* a duplicate learns nothing: no stored response */
			}
		case V_LIMIT:
			{
				char		hash[80];

				if (opt_mode == M_REPLAY)
				{
					/* the stored row by primary key; the client checks the hash */
					const char *v[2] = {SCOPE, key};

					if ((r = execp(c, "limit_replay", 2, v)) == NULL)
						return -1;
					request_hash_hex(req, hash);
					if (PQntuples(r) != 1)
						record_error(c, "limit replay", "no stored row");
					else if (strcmp(PQgetvalue(r, 0, 0), hash) != 0)
						record_error(c, "limit replay", "request hash differs");
					else
						id = id_in(PQgetvalue(r, 0, 1));
					PQclear(r);
					return id;
				}
				else
				{
					const char *v[4] = {SCOPE, key, hash, AMOUNT};

					request_hash_hex(req, hash);
					if ((r = execp(c, "limit", 4, v)) == NULL)
						return -1;
					id = id_in(PQgetvalue(r, 0, 0));
					*was_new = 1;
					PQclear(r);
					return id;
				}
			}
		case V_CLAIM_ONLY:
			{
				const char *v[3] = {key, req, SCOPE};

				if ((r = execp(c, "claim", 3, v)) == NULL)
					return -1;
				if (strcmp(PQgetvalue(r, 0, 0), opt_mode == M_NEW ? "new" : "replay") != 0)
					record_error(c, "claim_only", PQgetvalue(r, 0, 0));
				*was_new = opt_mode == M_NEW;
				id = opt_mode == M_NEW ? 0 : id_in(PQgetvalue(r, 0, 2));
				PQclear(r);
				return id;
			}
		case V_PLPGSQL:
		case V_CLAIM:
			{
				const char *claim = opt_variant == V_CLAIM ? "claim" : "ref_claim";
				const char *complete = opt_variant == V_CLAIM ? "complete" : "ref_complete";

				if (opt_mode == M_REPLAY)
				{
					/* a replay: the claim alone, autocommit, read-only */
					const char *v[3] = {key, req, SCOPE};

					if ((r = execp(c, claim, 3, v)) == NULL)
						return -1;
					if (strcmp(PQgetvalue(r, 0, 0), "replay") != 0)
						record_error(c, "replay", PQgetvalue(r, 0, 0));
					id = id_in(PQgetvalue(r, 0, 2));
					PQclear(r);
					return id;
				}
				return do_claim_pattern(c, key, req, was_new, claim, complete);
			}
		case V_SPI_FLOOR:
			{
				char		hash[80];
				const char *v[5] = {SCOPE, key, hash, key, AMOUNT};

				request_hash_hex(req, hash);
				if ((r = execp(c, "spi_floor", 5, v)) == NULL)
					return -1;
				id = id_in(PQgetvalue(r, 0, 0));
				*was_new = opt_mode == M_NEW;
				PQclear(r);
				return id;
			}
		case V_SPI_FLOOR_RULES:
			{
				const char *v[5] = {SCOPE, key, req, key, AMOUNT};

				if ((r = execp(c, "spi_floor_rules", 5, v)) == NULL)
					return -1;
				id = id_in(PQgetvalue(r, 0, 0));
				*was_new = opt_mode == M_NEW;
				PQclear(r);
				return id;
			}
		case V_SPI_FLOOR_EXPLICIT:
			{
				char		hash[80];

				request_hash_hex(req, hash);
				return do_claim_pattern(c, key, hash, was_new, "floor_claim", "floor_complete");
			}
		case V_EXECUTE:
			{
				const char *v[5] = {key, req, SCOPE, key, AMOUNT};

				if ((r = execp(c, "execute", 5, v)) == NULL)
					return -1;
				if (strcmp(PQgetvalue(r, 0, 0), "new") == 0)
					*was_new = 1;
				else if (strcmp(PQgetvalue(r, 0, 0), "replay") != 0)
					record_error(c, "execute", PQgetvalue(r, 0, 0));
				id = id_in(PQgetvalue(r, 0, 2));
				PQclear(r);
				return id;
			}
		case V_REDIS:
			{
				char		rkey[128],
							lkey[140];
				redisReply *rr;

				snprintf(rkey, sizeof(rkey), REDIS_PREFIX SCOPE ":%s", key);
				snprintf(lkey, sizeof(lkey), "%s:lock", rkey);
				if (opt_mode == M_REPLAY)
				{
					rr = redisCommand(c->redis, "GET %s", rkey);
					if (rr == NULL)
					{
						record_error(c, "redis GET", c->redis->errstr);
						c->dead = 1;
						return -1;
					}
					if (rr->type == REDIS_REPLY_STRING)
						id = id_in(rr->str);
					else
						record_error(c, "redis GET", "no stored response");
					freeReplyObject(rr);
					return id;
				}
				/* the seeds' Check(): SET NX lock, else GET the response */
				rr = redisCommand(c->redis, "SET %s processing NX PX 10000", lkey);
				if (rr == NULL)
				{
					record_error(c, "redis SET NX", c->redis->errstr);
					c->dead = 1;
					return -1;
				}
				if (rr->type == REDIS_REPLY_STATUS)
				{
					/* lock taken: the payment, then the response for 24 h */
					const char *v[2] = {key, AMOUNT};
					char		resp[96];

					freeReplyObject(rr);
					if ((r = execp(c, "pay", 2, v)) == NULL)
						return -1;
					id = atol(PQgetvalue(r, 0, 0));
					PQclear(r);
					snprintf(resp, sizeof(resp), "{\"status\": 201, \"body\": {\"id\": %ld}}", id);
					rr = redisCommand(c->redis, "SET %s %s EX 86400", rkey, resp);
					if (rr == NULL)
					{
						record_error(c, "redis SET", c->redis->errstr);
						c->dead = 1;
						return -1;
					}
					freeReplyObject(rr);
					*was_new = 1;
					return id;
				}
				freeReplyObject(rr);
				rr = redisCommand(c->redis, "GET %s", rkey);
				if (rr == NULL)
				{
					record_error(c, "redis GET", c->redis->errstr);
					c->dead = 1;
					return -1;
				}
				if (rr->type == REDIS_REPLY_STRING)
					id = id_in(rr->str);
				else
					*got_answer = 0;	/* locked, no response yet: 409 */
				freeReplyObject(rr);
				return id;
			}
	}
	return -1;
}

static void
keep_latency(Client *c, uint64_t us)
{
	if (c->nlat == c->cap)
	{
		c->cap = c->cap ? c->cap * 2 : 65536;
		c->lat = realloc(c->lat, c->cap * sizeof(uint32_t));
		if (c->lat == NULL)
			die("out of memory");
	}
	c->lat[c->nlat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t) us;
}

static void
connect_client(Client *c)
{
	c->pg = PQconnectdb(opt_pg);
	if (PQstatus(c->pg) != CONNECTION_OK)
		die("connect: %s", PQerrorMessage(c->pg));
	prepare(c, "pay", "INSERT INTO payments (order_id, amount) VALUES ($1, $2::int) RETURNING id");
	if (opt_variant == V_ON_CONFLICT)
		prepare(c, "pay_uk", "INSERT INTO payments_uk (order_id, amount) VALUES ($1, $2::int) "
				"ON CONFLICT (order_id) DO NOTHING RETURNING id");
	if (opt_variant == V_PLPGSQL)
	{
		prepare(c, "ref_claim", "SELECT outcome, response_code, response FROM ref_claim($1, $2::jsonb, $3)");
		prepare(c, "ref_complete", "SELECT ref_complete($1, 201, $2::jsonb, $3)");
	}
	if (opt_variant == V_CLAIM || opt_variant == V_CLAIM_ONLY)
	{
		prepare(c, "claim", "SELECT outcome, response_code, response FROM idem_claim($1, $2::jsonb, $3)");
		prepare(c, "complete", "SELECT idem_complete($1, 201, $2::jsonb, $3)");
	}
	if (opt_variant == V_EXECUTE && opt_text_args)
		prepare(c, "execute", "SELECT outcome, response_code, response FROM idem_execute($1, $2::jsonb, $3, 201, "
				"'INSERT INTO payments (order_id, amount) VALUES ($1, $2::int) RETURNING id', $4::text, $5::text)");
	else if (opt_variant == V_EXECUTE)
		prepare(c, "execute", "SELECT outcome, response_code, response FROM idem_execute($1, $2::jsonb, $3, 201, "
				"'INSERT INTO payments (order_id, amount) VALUES ($1, $2) RETURNING id', $4::text, $5::int)");
	/* the physical limit: payment and bare key row, one statement, no checks */
	if (opt_variant == V_LIMIT)
	{
		prepare(c, "limit", "WITH p AS (INSERT INTO payments (order_id, amount) VALUES ($2, $4::int) RETURNING id) "
				"INSERT INTO limit_keys (scope, key, request_hash, response) "
				"SELECT $1, $2, $3::bytea, jsonb_build_object('id', p.id) FROM p RETURNING response");
		prepare(c, "limit_replay", "SELECT request_hash, response FROM limit_keys WHERE scope = $1 AND key = $2");
	}
	/* the SPI floor (bench/floor/floor.sql) */
	if (opt_variant == V_SPI_FLOOR)
		prepare(c, "spi_floor", "SELECT spi_floor_execute($1, $2, $3::bytea, $4, $5::int)");
	if (opt_variant == V_SPI_FLOOR_RULES)
		prepare(c, "spi_floor_rules", "SELECT spi_floor_rules($1, $2, $3::jsonb, $4, $5::int)");
	if (opt_variant == V_SPI_FLOOR_EXPLICIT)
	{
		prepare(c, "floor_claim", "SELECT CASE WHEN spi_floor_claim($3, $1, $2::bytea) THEN 'new' ELSE 'taken' END");
		prepare(c, "floor_complete", "SELECT spi_floor_complete($3, $1, $2::jsonb)");
	}
	if (opt_variant == V_REDIS)
	{
		char		host[256];
		const char *colon = strrchr(opt_redis ? opt_redis : "", ':');

		if (opt_redis == NULL || colon == NULL)
			die("--redis HOST:PORT needed");
		snprintf(host, sizeof(host), "%.*s", (int) (colon - opt_redis), opt_redis);
		c->redis = redisConnect(host, atoi(colon + 1));
		if (c->redis == NULL || c->redis->err)
			die("redis connect: %s", c->redis ? c->redis->errstr : "?");
	}
}

static void *
client_main(void *arg)
{
	Client	   *c = arg;
	char		key[64];

	connect_client(c);
	atomic_fetch_add(&threads_ready, 1);
	while (atomic_load(&phase) == 0 && atomic_load(&threads_ready) < opt_clients)
		usleep(1000);

	while (!c->dead)
	{
		int			ph = atomic_load(&phase);
		long		key_index = -1;
		uint64_t	t0;
		long		id;
		int			was_new,
					got_answer;

		if (ph == 2 || (opt_requests > 0 && c->nlat >= opt_requests))
			break;
		switch (opt_mode)
		{
			case M_NEW:
				random_key(c, key);
				break;
			case M_REPLAY:
				key_of(1 + (long) (rnd(c) % (uint64_t) opt_keys), key);
				break;
			case M_CONTENTION:
				{
					long		n = atomic_fetch_add(&contention_counter, 1);
					long		gen = n / (CONTENTION_KEYS * CONTENTION_PER_KEY);

					key_index = gen * CONTENTION_KEYS + n % CONTENTION_KEYS;
					snprintf(key, sizeof(key), "%s-%07ld-%d", opt_tag, gen, (int) (n % CONTENTION_KEYS));
				}
				break;
		}
		t0 = now_us();
		for (;;)
		{
			long		errs = c->errors;

			id = one_request(c, key, &was_new, &got_answer);
			if (got_answer || c->dead || c->errors != errs)
				break;
			/* Redis: locked, no response stored yet -- 409, try again */
			if (ph == 1 && atomic_load(&phase) == 1)
				c->n_409++;
			usleep(RETRY_SLEEP_US);
		}
		if (ph == 1 && atomic_load(&phase) == 1)
		{
			keep_latency(c, now_us() - t0);
			if (was_new)
				c->n_new++;
			else
				c->n_replay++;
		}
		/* exactly-once needs every answer, warm-up's too */
		if (opt_mode == M_CONTENTION)
			observe(c, key_index, id, was_new);
	}
	atomic_fetch_add(&threads_done, 1);
	return NULL;
}

/*
 * CPU time (clock ticks) of the server processes: each given pid (the
 * postmaster, redis-server) with its reaped children, plus its live
 * children (the backends).  Read from /proc, so the driver runs as root or
 * as the servers' user.
 */
static int
read_stat(int pid, int *ppid, long long *self, long long *children)
{
	char		path[64],
				buf[1024],
			   *p;
	FILE	   *f;
	size_t		n;
	long long	ut, st, cut, cst;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	/* fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime */
	if (sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld %lld %lld",
			   ppid, &ut, &st, &cut, &cst) != 5)
		return 0;
	*self = ut + st;
	*children = cut + cst;
	return 1;
}

static long long
server_ticks(void)
{
	long long	total = 0,
				self,
				children;
	int			ppid;
	DIR		   *d;
	struct dirent *e;

	if (n_server_pids == 0)
		return 0;
	for (int i = 0; i < n_server_pids; i++)
		if (read_stat(server_pids[i], &ppid, &self, &children))
			total += self + children;
	if ((d = opendir("/proc")) == NULL)
		return total;
	while ((e = readdir(d)) != NULL)
	{
		int			pid = atoi(e->d_name);

		if (pid <= 0 || !read_stat(pid, &ppid, &self, &children))
			continue;
		for (int i = 0; i < n_server_pids; i++)
			if (ppid == server_pids[i])
				total += self;
	}
	closedir(d);
	return total;
}

/* busy clock ticks of the whole machine, from /proc/stat */
static long long
machine_busy_ticks(void)
{
	long long	v[8] = {0};
	FILE	   *f = fopen("/proc/stat", "r");

	if (f == NULL)
		return 0;
	if (fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
		v[0] = v[1] = v[2] = v[5] = v[6] = v[7] = 0;
	fclose(f);
	/* user nice system idle iowait irq softirq steal: all but idle and iowait */
	return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
}

static double
own_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a,
				y = *(const uint32_t *) b;

	return x < y ? -1 : x > y;
}

static char *
scalar(PGconn *conn, const char *sql)
{
	PGresult   *r = PQexec(conn, sql);
	static char buf[256];

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		die("%s: %s", sql, PQresultErrorMessage(r));
	snprintf(buf, sizeof(buf), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return buf;
}

/*
 * Exactly-once after a contention run: for every key raced, exactly one
 * payment, and every answer any client got names that payment (for the
 * variants that store a response).
 */
static int
check_exactly_once(PGconn *conn, long nkeys_raced)
{
	char		sql[512];
	PGresult   *r;
	long	   *payment,
				i,
				keys = 0,
				payments = 0,
				dup = 0,
				unpaid = 0,
				mismatched = 0,
				answers = 0,
				news = 0;
	int			ok;
	size_t		taglen = strlen(opt_tag);

	payment = calloc(nkeys_raced + 1, sizeof(long));
	snprintf(sql, sizeof(sql),
			 "SELECT order_id, count(*), min(id) FROM %s WHERE order_id LIKE '%s-%%' GROUP BY order_id",
			 opt_variant == V_ON_CONFLICT ? "payments_uk" : "payments", opt_tag);
	r = PQexec(conn, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("%s: %s", sql, PQresultErrorMessage(r));
	for (i = 0; i < PQntuples(r); i++)
	{
		const char *k = PQgetvalue(r, i, 0) + taglen + 1;
		long		gen = atol(k),
					slot = atol(strchr(k, '-') + 1),
					idx = gen * CONTENTION_KEYS + slot;

		payments += atol(PQgetvalue(r, i, 1));
		if (atol(PQgetvalue(r, i, 1)) > 1)
			dup++;
		if (idx >= 0 && idx <= nkeys_raced)
			payment[idx] = atol(PQgetvalue(r, i, 2));
	}
	PQclear(r);

	{
		char	   *seen = calloc(nkeys_raced + 1, 1);

		for (int t = 0; t < opt_clients; t++)
			for (i = 0; i < clients[t].nobs; i++)
			{
				Observation *o = &clients[t].obs[i];

				if (o->key_index < 0 || o->key_index > nkeys_raced)
					continue;
				if (!seen[o->key_index])
				{
					seen[o->key_index] = 1;
					keys++;
					if (payment[o->key_index] == 0)
						unpaid++;
				}
				news += o->was_new;
				if (opt_variant == V_ON_CONFLICT && !o->was_new)
					continue;	/* duplicates get no response to compare */
				answers++;
				if (o->payment_id != payment[o->key_index])
					mismatched++;
			}
		free(seen);
	}
	free(payment);
	ok = dup == 0 && unpaid == 0 && mismatched == 0 && payments == keys && news == keys;
	printf("CHECK %s: %ld keys raced, %ld payments, %ld 'new' answers, %ld keys paid twice, %ld keys unpaid, "
		   "%ld of %ld answers naming another payment%s\n",
		   ok ? "held" : "FAILED", keys, payments, news, dup, unpaid, mismatched, answers,
		   opt_variant == V_ON_CONFLICT ? " (ON CONFLICT: duplicates get no response; payments checked only)" : "");
	return ok;
}

static void
fill_redis(long n)
{
	char		host[256];
	const char *colon = strrchr(opt_redis, ':');
	redisContext *rc;
	long		i,
				pending = 0;

	snprintf(host, sizeof(host), "%.*s", (int) (colon - opt_redis), opt_redis);
	rc = redisConnect(host, atoi(colon + 1));
	if (rc == NULL || rc->err)
		die("redis connect: %s", rc ? rc->errstr : "?");
	for (i = 1; i <= n; i++)
	{
		char		key[64],
					rkey[128],
					resp[96];

		key_of(i, key);
		snprintf(rkey, sizeof(rkey), REDIS_PREFIX SCOPE ":%s", key);
		snprintf(resp, sizeof(resp), "{\"status\": 201, \"body\": {\"id\": %ld}}", i);
		redisAppendCommand(rc, "SET %s %s EX 86400", rkey, resp);
		if (++pending == 1000 || i == n)
		{
			while (pending-- > 0)
			{
				redisReply *rr;

				if (redisGetReply(rc, (void **) &rr) != REDIS_OK)
					die("redis fill: %s", rc->errstr);
				freeReplyObject(rr);
			}
			pending = 0;
		}
	}
	redisFree(rc);
}

static int
parse_enum(const char *s, const char **names, int n, const char *what)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	die("unknown %s: %s", what, s);
	return -1;
}

int
main(int argc, char **argv)
{
	long		fill = 0;
	PGconn	   *mon;
	char		lsn0[64],
				lsn1[64],
				sql[256];
	double		t_start,
				t_end,
				wal,
				cpu0,
				cpu1;
	long long	ticks0,
				ticks1,
				busy0,
				busy1;
	long		n = 0,
				errors = 0,
				n_new = 0,
				n_replay = 0,
				n_409 = 0;
	uint32_t   *all;
	const char *first_error = NULL;
	const char *check = "-";

	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i],
				   *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--text-args") == 0)
		{
			opt_text_args = 1;
			continue;
		}
		if (v == NULL)
			die("%s needs a value", a);
		i++;
		if (strcmp(a, "--pg") == 0)
			opt_pg = v;
		else if (strcmp(a, "--redis") == 0)
			opt_redis = v;
		else if (strcmp(a, "--variant") == 0)
			opt_variant = parse_enum(v, variant_names, N_VARIANTS, "variant");
		else if (strcmp(a, "--mode") == 0)
			opt_mode = parse_enum(v, mode_names, 3, "mode");
		else if (strcmp(a, "--clients") == 0)
			opt_clients = atoi(v);
		else if (strcmp(a, "--seconds") == 0)
			opt_seconds = atof(v);
		else if (strcmp(a, "--warmup") == 0)
			opt_warmup = atof(v);
		else if (strcmp(a, "--keys") == 0)
			opt_keys = atol(v);
		else if (strcmp(a, "--requests") == 0)
			opt_requests = atol(v);
		else if (strcmp(a, "--tag") == 0)
			opt_tag = v;
		else if (strcmp(a, "--server-pids") == 0)
		{
			char	   *copy = strdup(v),
					   *tok;

			for (tok = strtok(copy, ","); tok && n_server_pids < 8; tok = strtok(NULL, ","))
				if (atoi(tok) > 0)
					server_pids[n_server_pids++] = atoi(tok);
		}
		else if (strcmp(a, "--fill-redis") == 0)
			fill = atol(v);
		else
			die("unknown option %s", a);
	}
	if (fill > 0)
	{
		if (opt_redis == NULL)
			die("--fill-redis needs --redis");
		fill_redis(fill);
		return 0;
	}
	if (opt_pg == NULL)
		die("--pg CONNINFO needed");
	if (opt_clients < 1 || opt_seconds <= 0 || opt_keys < 1)
		die("bad --clients, --seconds or --keys");
	if (opt_variant == V_FLOOR && opt_mode != M_NEW)
		die("floor runs in mode new only");
	if (opt_variant == V_ON_CONFLICT && opt_mode == M_REPLAY)
		die("on_conflict has no replay mode (it stores no response)");
	if ((opt_variant == V_LIMIT || opt_variant == V_CLAIM_ONLY || opt_variant == V_SPI_FLOOR ||
		 opt_variant == V_SPI_FLOOR_RULES) &&
		opt_mode == M_CONTENTION)
		die("%s has no contention mode", variant_names[opt_variant]);
	if (opt_variant == V_SPI_FLOOR_EXPLICIT && opt_mode != M_NEW)
		die("spi_floor_explicit runs in mode new only");

	mon = PQconnectdb(opt_pg);
	if (PQstatus(mon) != CONNECTION_OK)
		die("connect: %s", PQerrorMessage(mon));

	clients = calloc(opt_clients, sizeof(Client));
	for (int i = 0; i < opt_clients; i++)
	{
		Client	   *c = &clients[i];

		c->id = i;
		c->rng[0] = (uint64_t) time(NULL) * 6364136223846793005ULL ^ (uint64_t) getpid() << 20 ^ (uint64_t) i;
		c->rng[1] = 0x9E3779B97F4A7C15ULL * (uint64_t) (i + 1) ^ now_us();
		for (int k = 0; k < 8; k++)
			rnd(c);
		if (pthread_create(&c->thread, NULL, client_main, c) != 0)
			die("pthread_create: %s", strerror(errno));
	}
	while (atomic_load(&threads_ready) < opt_clients)
		usleep(1000);

	usleep((useconds_t) (opt_warmup * 1e6));
	snprintf(lsn0, sizeof(lsn0), "%s", scalar(mon, "SELECT pg_current_wal_insert_lsn()"));
	ticks0 = server_ticks();
	busy0 = machine_busy_ticks();
	cpu0 = own_cpu_s();
	t_start = now_s();
	atomic_store(&phase, 1);
	if (opt_requests > 0)		/* until every client has made its requests */
		while (atomic_load(&threads_done) < opt_clients)
			usleep(1000);
	else
		usleep((useconds_t) (opt_seconds * 1e6));
	atomic_store(&phase, 2);
	t_end = now_s();
	cpu1 = own_cpu_s();
	busy1 = machine_busy_ticks();
	ticks1 = server_ticks();
	snprintf(lsn1, sizeof(lsn1), "%s", scalar(mon, "SELECT pg_current_wal_insert_lsn()"));
	for (int i = 0; i < opt_clients; i++)
		pthread_join(clients[i].thread, NULL);

	for (int i = 0; i < opt_clients; i++)
	{
		n += clients[i].nlat;
		errors += clients[i].errors;
		n_new += clients[i].n_new;
		n_replay += clients[i].n_replay;
		n_409 += clients[i].n_409;
		if (first_error == NULL && clients[i].first_error[0])
			first_error = clients[i].first_error;
	}
	all = malloc((n + 1) * sizeof(uint32_t));
	n = 0;
	for (int i = 0; i < opt_clients; i++)
	{
		memcpy(all + n, clients[i].lat, clients[i].nlat * sizeof(uint32_t));
		n += clients[i].nlat;
	}
	qsort(all, n, sizeof(uint32_t), cmp_u32);
	snprintf(sql, sizeof(sql), "SELECT pg_wal_lsn_diff('%s', '%s')", lsn1, lsn0);
	wal = atof(scalar(mon, sql));

	if (opt_mode == M_CONTENTION)
	{
		long		raced = atomic_load(&contention_counter) / CONTENTION_PER_KEY + CONTENTION_KEYS;

		check = check_exactly_once(mon, raced) ? "held" : "FAILED";
	}
	printf("BACKENDS");
	for (int i = 0; i < opt_clients; i++)
		printf(" %d", PQbackendPID(clients[i].pg));
	printf("\n");
	if (first_error)
		printf("ERROR %ld errors; first: %s\n", errors, first_error);
	printf("RESULT %s %s %ld %.0f %.3f %.3f %.0f %ld %s %ld %ld %ld %.0f %.0f %.2f\n",
		   variant_names[opt_variant], mode_names[opt_mode], n, n / (t_end - t_start),
		   n ? all[(long) (n * 0.50)] / 1000.0 : 0, n ? all[(long) ((n - 1) * 0.99)] / 1000.0 : 0,
		   n ? wal / n : 0, errors, check, n_new, n_replay, n_409,
		   n ? (ticks1 - ticks0) * 1e6 / sysconf(_SC_CLK_TCK) / n : 0,
		   n ? (cpu1 - cpu0) * 1e6 / n : 0,
		   /* cores kept busy by everything else on the machine */
		   ((busy1 - busy0 - (ticks1 - ticks0)) / (double) sysconf(_SC_CLK_TCK) - (cpu1 - cpu0)) / (t_end - t_start));
	PQfinish(mon);
	for (int i = 0; i < opt_clients; i++)
	{
		PQfinish(clients[i].pg);
		if (clients[i].redis)
			redisFree(clients[i].redis);
	}
	return errors > 0 || strcmp(check, "FAILED") == 0;
}
