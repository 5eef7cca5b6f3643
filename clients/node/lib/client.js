'use strict';
// The key functions of the idempotency extension on a pg client (a Client,
// a PoolClient or a Pool: anything with query()), and its SQLSTATEs as
// IdempotencyError, each with the HTTP status the IETF Idempotency-Key
// draft gives it (docs/reference.md, "Errors").

// SQLSTATE -> [kind, HTTP status, problem title]
const KINDS = {
  IK001: ['request_mismatch', 422, 'Idempotency-Key reused with a different request body'],
  IK002: ['stale_token', 409, 'This attempt lost its claim on the Idempotency-Key'],
  IK003: ['not_processing', 409, 'This attempt lost its claim on the Idempotency-Key'],
  IK004: ['key_not_found', 404, 'No such Idempotency-Key'],
  IK005: ['token_required', 500, 'Internal error'],
  IK006: ['row_security_off', 503, 'Idempotency keys unavailable'],
  22004: ['invalid_key', 400, 'Invalid Idempotency-Key or scope'],
  22023: ['invalid_key', 400, 'Invalid Idempotency-Key or scope'],
  25006: ['read_only', 503, 'Database is read-only'],
};

function kindOf(code) {
  if (typeof code !== 'string') return ['database', 500, 'Internal error'];
  if (KINDS[code]) return KINDS[code];
  // other data exceptions: PostgreSQL refused the request as jsonb (a
  // \u0000 in a string, a number beyond numeric)
  if (code.startsWith('22')) return ['invalid_request', 400, 'Invalid request'];
  return ['database', 500, 'Internal error'];
}

// An error of a key function (or of any query, through from()): the
// SQLSTATE (code), what it means (kind), the HTTP status and the problem
// (RFC 9457) to answer.  The driver's error is the cause.
class IdempotencyError extends Error {
  constructor(message, { code = null, detail = undefined, cause = undefined } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'IdempotencyError';
    const [kind, status, title] = kindOf(code);
    this.code = code;
    this.kind = kind;
    this.status = status;
    this.title = title;
    this.detail = detail;
  }

  // Worth retrying later with the same key (409, 503).
  get retryable() {
    return this.status === 409 || this.status === 503;
  }

  // Seconds for Retry-After, or null.
  get retryAfter() {
    return this.retryable ? 1 : null;
  }

  // The problem body's members (RFC 9457).  A 500's detail never carries
  // SQL or the driver's message.
  problem() {
    let detail;
    switch (this.kind) {
      case 'request_mismatch': detail = this.detail || this.message; break;
      case 'invalid_key': detail = this.message; break;
      case 'invalid_request': detail = 'PostgreSQL did not accept the body.'; break;
      case 'stale_token':
      case 'not_processing': detail = 'Another attempt took the key over; retry to get its result.'; break;
      case 'key_not_found': detail = this.detail || this.message; break;
      case 'read_only':
      case 'row_security_off': detail = 'Retry later.'; break;
      default: detail = 'The request was not processed.';
    }
    return { type: 'about:blank', title: this.title, status: this.status, detail };
  }

  // Any error as an IdempotencyError: a driver error by its SQLSTATE, an
  // IdempotencyError as it is, anything else as a 500 (kind 'database').
  static from(err) {
    if (err instanceof IdempotencyError) return err;
    const code = err && typeof err.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code) ? err.code : null;
    return new IdempotencyError(err && err.message ? err.message : String(err),
      { code, detail: err ? err.detail : undefined, cause: err });
  }
}

async function run(db, sql, params) {
  try {
    return await db.query(sql, params);
  } catch (err) {
    throw IdempotencyError.from(err);
  }
}

const seconds = (s) => (s === undefined || s === null ? null : Number(s));

// The claim's response comes back as text (response::text): a replay sends
// exactly what PostgreSQL stored.
const CLAIM = `SELECT outcome, token::text AS token, status::text AS status, response_code, response::text AS response,
                      recovery_point, ceil(extract(epoch FROM retry_after))::int AS retry_after_s
               FROM idem_claim($1, $2::jsonb, $3, lease => make_interval(secs => $4), wait => $5,
                               await_result => make_interval(secs => $6))`;

// idem_claim(key, request, scope, lease, wait, await_result).  request is
// JSON text (or an object, serialized here), or null.  Options: lease
// (seconds; a committed claim with a fencing token, for work outside the
// transaction), wait (default true: a duplicate of a request whose
// transaction is open waits for it), awaitResult (seconds: a duplicate of a
// committed claim in flight waits this long for its result).  Resolves to
// { outcome, token, status, responseCode, response, recoveryPoint, retryAfter }:
// outcome 'new', 'reclaimed', 'replay', 'in_progress' or 'stale'; token a
// string (bigint) or null; status the row's ('completed' or 'failed' for a
// replay); responseCode null when none was stored; response the stored jsonb
// as text.
async function claim(db, key, request, scope = '', { lease = null, wait = true, awaitResult = null } = {}) {
  const body = request === null || request === undefined || typeof request === 'string'
    ? request ?? null : JSON.stringify(request);
  const r = await run(db, CLAIM, [key, body, scope, seconds(lease), wait, seconds(awaitResult)]);
  const row = r.rows[0];
  return {
    outcome: row.outcome,
    token: row.token,
    status: row.status,
    responseCode: row.response_code,
    response: row.response,
    recoveryPoint: row.recovery_point,
    retryAfter: row.retry_after_s,
  };
}

// idem_complete: records the response (JSON text, or an object) of a
// processing claim; token for a committed claim, null in the claim's
// transaction.
async function complete(db, key, status, response, scope = '', token = null) {
  const body = response === null || response === undefined || typeof response === 'string'
    ? response ?? null : JSON.stringify(response);
  await run(db, 'SELECT idem_complete($1, $2, $3::jsonb, $4, $5::bigint)', [key, status, body, scope, token]);
}

// idem_fail: records a failed attempt; retryable (default) lets the next
// claim take the key over, otherwise status and response are replayed.
async function fail(db, key, scope = '', token = null, { status = null, response = null, retryable = true } = {}) {
  const body = response === null || typeof response === 'string' ? response : JSON.stringify(response);
  await run(db, 'SELECT idem_fail($1, $2, $3::bigint, $4, $5::jsonb, $6)',
    [key, scope, token, status, body, retryable]);
}

// idem_heartbeat: renews a committed claim's lease (seconds; null: the
// claim's own); resolves to the new end of the lease (a Date).
async function heartbeat(db, key, scope, token, lease = null) {
  const r = await run(db, 'SELECT idem_heartbeat($1, $2, $3::bigint, make_interval(secs => $4)) AS until',
    [key, scope, token, seconds(lease)]);
  return r.rows[0].until;
}

// idem_checkpoint: records a recovery point, fenced by the token.
async function checkpoint(db, key, point, scope = '', token = null) {
  await run(db, 'SELECT idem_checkpoint($1, $2, $3, $4::bigint)', [key, point, scope, token]);
}

// idem_release: gives a processing claim up (the next claim starts afresh).
async function release(db, key, scope = '', token = null) {
  await run(db, 'SELECT idem_release($1, $2, $3::bigint)', [key, scope, token]);
}

module.exports = { IdempotencyError, claim, complete, fail, heartbeat, checkpoint, release };
