'use strict';
// The Idempotency-Key middleware, for Express (4 and 5) or any
// (req, res, next) stack on node:http.  For each request it
//  1. requires the Idempotency-Key header (400), an application/json body
//     (415) of at most maxBody bytes (413) that is JSON (400), and whatever
//     validate says (422 usually), before anything is claimed: a rejected
//     request leaves no key behind;
//  2. takes the scope from the function it was given (the authenticated
//     caller; by default req.idempotencyScope, set by an authentication
//     middleware, else ''), or from a header only when told to
//     (scopeFromHeader), and claims the key: idem_claim(key, body, scope)
//     in a transaction that the handler then works in (default), or
//     committed at once with a lease and a fencing token (committed(req):
//     work outside the database), with heartbeats on their own pool;
//  3. answers a replay with the stored status and bytes and
//     Idempotent-Replayed: true, a request in flight with 409 + Retry-After,
//     a key used with another body with 422;
//  4. otherwise calls the handler with req.idempotency (a Claim), which
//     works in claim.tx() and answers with claim.respond(status, json): the
//     key is completed in that transaction, committed, and the response
//     sent as PostgreSQL stored it (jsonb text), so the first answer and
//     every replay are the same bytes.  claim.fail() answers a failure
//     (rolled back, or recorded failed and retryable), claim.error(err) a
//     database error;
//  5. a claim the handler has not answered within timeout seconds (a
//     handler that returned without answering, an Express 4 async handler
//     that rejected, a remote call that hangs) is answered 503 with
//     Retry-After.  A claim in a transaction is undone as fail() does:
//     neither its transaction nor its connection outlives it.  A committed
//     claim is not: its work is outside the database and may still be
//     running, so the claim stays held (heartbeats go on, a retry waits or
//     gets 409) and the handler's later respond()/fail() settles the key.
//     A handler that has still not settled it timeout seconds after that
//     is given up: its heartbeats stop and its transaction (if any) is
//     rolled back, without idem_fail; the lease then lapses and a retry
//     takes the key over (reclaimed, at its recovery point).

const client = require('./client');
const { IdempotencyError } = client;

const JSON_TYPE = 'application/json; charset=utf-8';
const PROBLEM_TYPE = 'application/problem+json; charset=utf-8';

function send(res, status, contentType, body, headers = {}) {
  if (res.headersSent) return;
  res.statusCode = status;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  if (body === null) return res.end();
  res.setHeader('Content-Type', contentType);
  return res.end(body);
}

// An application/problem+json answer (RFC 9457).
function sendProblem(res, status, title, detail, headers = {}) {
  send(res, status, PROBLEM_TYPE, JSON.stringify({ type: 'about:blank', title, status, detail }), headers);
}

// A stored answer: the body is text produced by PostgreSQL (jsonb output).
function sendStored(res, status, text, replayed) {
  send(res, status, JSON_TYPE, text, replayed ? { 'Idempotent-Replayed': 'true' } : {});
}

// Node's timers take at most 2^31 - 1 ms (a longer one fires at once, 1 ms
// later, and an interval every 1 ms): the bound of the seconds they are given.
const TIMER_MAX = 2147483;

const elapsedMs = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

// A problem the configuration's functions (scope, validate) may answer with.
function asProblem(p, fallbackStatus, fallbackTitle) {
  if (typeof p === 'string') return { status: fallbackStatus, title: fallbackTitle, detail: p };
  return { status: p.status || fallbackStatus, title: p.title || fallbackTitle, detail: p.detail || '' };
}

function option(value, fallback, name, min, max = Infinity) {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max)
    throw new TypeError(`pg-idempotency: ${name} must be a number >= ${min}${max < Infinity ? ` and <= ${max}` : ''}, not ${value}`);
  return value;
}

// The claim's connection as the handler gets it (tx()): once the claim is
// settled (answered, failed, abandoned), the connection is back in the pool,
// maybe in another request's transaction, so a handler that kept it is
// refused there (query and end reject, SQLSTATE 55000) instead of reaching
// that transaction; release() is the claim's to do, a no-op here.
function guardConnection(state, db) {
  const refused = () => Object.assign(
    new Error('pg-idempotency: the claim was answered already; its connection is no longer the handler\'s'),
    { code: '55000' });
  const open = () => state.db === db && !state.settled;
  return new Proxy(db, {
    get(target, prop) {
      if (prop === 'release') return () => {};
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (prop === 'query' || prop === 'end') {
        return (...args) => {
          if (open()) return value.apply(target, args);
          const err = refused();
          const callback = args[args.length - 1];
          if (typeof callback === 'function') return void process.nextTick(callback, err);
          return Promise.reject(err);
        };
      }
      return value.bind(target);
    },
  });
}

// A connection of the pool, held across the handler.  pg emits 'error' on
// a checked-out client whose server connection ends (pg_terminate_backend,
// idle_in_transaction_session_timeout, a failover), and an 'error' event
// nobody listens to ends the process with every request in flight.  The
// error reaches the claim anyway (its next query rejects); the listener
// goes when the client is released (pg-pool sets release at each checkout).
async function connect(pool) {
  const db = await pool.connect();
  const ignore = () => {};
  db.on('error', ignore);
  const release = db.release;
  db.release = (err) => {
    db.removeListener('error', ignore);
    return release.call(db, err);
  };
  return db;
}

const settledError = () => Object.assign(new Error('pg-idempotency: the claim was answered already'),
  { code: '55000', settled: true });

// What the handler of a claimed request gets as req.idempotency.
class Claim {
  constructor(state) {
    this._s = state;
  }

  get key() { return this._s.key; }
  get scope() { return this._s.scope; }
  // 'new' or 'reclaimed'
  get outcome() { return this._s.claim.outcome; }
  get token() { return this._s.claim.token; }
  get committed() { return this._s.committed; }
  // What an earlier attempt recorded with checkpoint() (a reclaimed claim), or null.
  get recoveryPoint() { return this._s.claim.recoveryPoint; }
  // The request body: parsed, and as received.
  get body() { return this._s.body; }
  get rawBody() { return this._s.rawBody; }
  // True once a heartbeat found the claim taken over (IK002 / IK003).
  get lost() { return this._s.lost; }
  get settled() { return this._s.settled; }

  // The claim's transaction, a pg client: the work and the key commit
  // together.  A committed claim begins one at the first call, on a pool
  // connection, in which respond() then completes the key with its token.
  // Guarded: refused once the claim is settled (guardConnection).
  async tx() {
    const s = this._s;
    if (s.settled) throw settledError();
    const db = await this._tx();
    if (!s.guard || s.guard.db !== db) s.guard = { db, client: guardConnection(s, db) };
    return s.guard.client;
  }

  // The claim's transaction, begun at the first call; calls meanwhile wait
  // for the same one.  own: respond's, after it settled the claim; else
  // the handler's, refused once the claim is settled.
  async _tx(own = false) {
    const s = this._s;
    while (!s.db) {
      if (!s.opening) s.opening = this._open(own).finally(() => { s.opening = null; });
      try {
        await s.opening;
      } catch (err) {
        // the handler's, refused as the claim settled: respond opens its own
        if (!(own && err.settled)) throw err;
      }
    }
    return s.db;
  }

  async _open(own) {
    const s = this._s;
    const db = await connect(s.cfg.pool);
    // settled while it waited for the connection (the timeout: a pool run
    // dry is when it fires): the claim has no transaction any more
    if (s.settled && !own) {
      db.release();
      throw settledError();
    }
    try {
      await db.query('BEGIN');
    } catch (err) {
      db.release(err);
      throw IdempotencyError.from(err);
    }
    if (s.settled && !own) {
      const bad = await db.query('ROLLBACK').then(() => undefined, (x) => x);
      db.release(bad);
      throw settledError();
    }
    s.db = db;
    if (!own) s.hadTx = true;
    return db;
  }

  // Records a recovery point (fenced by the token): a claim that takes the
  // key over later finds it in recoveryPoint.  IK002 when the key was taken
  // over meanwhile.
  async checkpoint(point) {
    const s = this._s;
    if (s.settled) throw settledError();
    const db = s.committed ? s.cfg.pool : await this._tx();
    await client.checkpoint(db, s.key, point, s.scope, s.claim.token);
  }

  // Records the answer (status, JSON text, an object, or null for none) with the key in the
  // claim's transaction, commits, and sends it as PostgreSQL stored it.  A
  // failure of either is answered (and reported) here: this never rejects.
  async respond(status, json) {
    const s = this._s;
    // null: no body (stored as SQL NULL, replayed without one).  Serialized
    // before the claim is settled: a BigInt or a cycle throws here, and the
    // claim is then undone as error() does, not left open with its lock.
    let text;
    try {
      text = json === null || json === undefined || typeof json === 'string' ? json ?? null : JSON.stringify(json);
    } catch (err) {
      return this.error(err);
    }
    if (s.settled) return this._late(status, text);
    // A committed claim's heartbeats go on until its answer (or the
    // failure that replaces it) is recorded: the connection respond waits
    // for (a busy pool) may come after the lease, and a retry would take the
    // key over.  For at most a timeout: an answer still not recorded then
    // (a pool that never gives a connection) lets the lease lapse, as a
    // handler given up does.
    if (!this._begin(true)) return;
    if (s.beat && s.cfg.timeout > 0) {
      s.timer = setTimeout(() => clearInterval(s.beat), s.cfg.timeout * 1000);
      s.timer.unref();
    }
    const done = () => { clearInterval(s.beat); clearTimeout(s.timer); };
    let stored;
    let committing = false;
    try {
      const db = await this._tx(true);
      const r = await db.query('SELECT idem_complete($1, $2, $3::jsonb, $4, $5::bigint), $3::jsonb::text AS response',
        [s.key, status, text, s.scope, s.committed ? s.claim.token : null]);
      committing = true;
      await db.query('COMMIT');
      stored = r.rows[0].response;
    } catch (err) {
      try {
        return await this._notRecorded(IdempotencyError.from(err), committing);
      } finally {
        done();
      }
    }
    done();
    this._release();
    sendStored(s.res, status, stored, false);
    s.report(s.claim.outcome, status, null);
  }

  // respond() after the claim was settled.  A committed claim given up
  // (_lapse) is still its own until a retry takes the key over: the answer
  // of a handler that began no transaction (none of its work was rolled
  // back with it) is recorded, fenced by the token, so that the retry
  // replays it instead of doing the work again.  Otherwise ignored, logged.
  async _late(status, text) {
    const s = this._s;
    const key = JSON.stringify(s.key);
    if (!s.lapsed || s.lost || s.hadTx)
      return void s.cfg.log.error(`pg-idempotency: respond(${status}) of key ${key} after its claim was settled: ignored`);
    await client.complete(s.cfg.pool, s.key, status, text, s.scope, s.claim.token).then(
      () => s.cfg.log.error(`pg-idempotency: the late answer of key ${key} was recorded`),
      (err) => s.cfg.log.error(`pg-idempotency: the late answer of key ${key} was not recorded:`, err.message));
  }

  // respond's answer not recorded (e): undone and answered as error() does,
  // but for two cases.  The connection lost with the COMMIT sent
  // (committing; no SQLSTATE, or class 08 or 57P): the key and the work may
  // have committed, so not "not processed" (a client would retry with a new
  // key) but 503, retry with the same key, which tells.  The handler's
  // answer refused by idem_complete (class 22: a \u0000 in a string, 22P05;
  // 54000: too large): the server's fault (500), not the request's (400);
  // a committed claim's work outside the database is done, and a retry
  // taking the key over would do it again and be refused again, so it is
  // recorded failed, not retryable, and its 500 replayed.
  async _notRecorded(e, committing) {
    const s = this._s;
    if (committing && (e.code === null || /^(08|57P)/.test(e.code))) {
      s.cfg.log.error(`pg-idempotency: the COMMIT of key ${JSON.stringify(s.key)} failed, it may have committed:`, e.cause || e);
      Object.assign(e, { kind: 'outcome_unknown', status: 503, title: 'Outcome unknown' });
      e.problem = () => ({ type: 'about:blank', title: e.title, status: 503,
        detail: 'The request may have been processed. Retry it with the same Idempotency-Key to get its result.' });
    } else if (e.kind === 'invalid_request' || e.kind === 'invalid_key' || e.code === '54000') {
      Object.assign(e, { kind: 'database', status: 500, title: 'Internal error' });
      if (s.committed && !committing) {
        s.unstorable = true;
        e.problem = () => ({ type: 'about:blank', title: e.title, status: 500,
          detail: 'The request was processed but its answer could not be stored.' });
      }
    }
    return this._failWith(e);
  }

  // A failed attempt, answered with a problem: the transaction is rolled
  // back (the key is free again) or, for a committed claim, the attempt is
  // recorded failed and retryable (the next request takes the key over and
  // finds the recovery point).  Reported with the claim's outcome.
  async fail({ status = 500, title = 'Internal error', detail = 'The request was not processed.', headers = {} } = {}) {
    const s = this._s;
    if (!this._begin()) return;
    await this._undo();
    sendProblem(s.res, status, title, detail, headers);
    s.report(s.claim.outcome, status, null);
  }

  // An error (a database error of the handler's work, IK002 of a
  // checkpoint): undone as fail() does, answered with the error's problem
  // and status (500 for anything but the extension's SQLSTATEs, logged, the
  // detail without SQL), reported 'error'.
  async error(err) {
    if (!this._begin()) return;
    return this._failWith(IdempotencyError.from(err));
  }

  _begin(keepBeating = false) {
    if (this._s.settled) return false;
    this._s.settled = true;
    if (!keepBeating) clearInterval(this._s.beat);
    clearTimeout(this._s.timer);
    return true;
  }

  _release(err) {
    const s = this._s;
    if (s.db) {
      s.db.release(err);
      s.db = null;
    }
  }

  async _undo() {
    const s = this._s;
    if (s.db) {
      const bad = await s.db.query('ROLLBACK').then(() => undefined, (err) => err);
      this._release(bad);
    }
    if (s.committed && !s.lost)
      await client.fail(s.cfg.pool, s.key, s.scope, s.claim.token, s.unstorable
        ? { status: 500, response: { error: 'answer_not_storable' }, retryable: false } : {}).catch((err) => {
        if (err.kind !== 'stale_token' && err.kind !== 'not_processing')
          s.cfg.log.error('pg-idempotency: idem_fail failed:', err.message);
      });
  }

  async _failWith(e) {
    const s = this._s;
    // after a timeout the client has its 503: this is logged, not answered
    if (e.status === 500 || s.timedOut) s.cfg.log.error('pg-idempotency: request failed:', e.cause || e);
    await this._undo();
    answerError(s.res, e);
    s.report('error', e.status, e.code);
  }

  // The handler did not answer within the timeout: answered 503 with
  // Retry-After.  A claim in a transaction is undone as fail() does (a
  // query of the handler's in flight on the claim's connection ends first:
  // statement_timeout bounds it).  A committed claim stays held (below).
  // Answered some other way meanwhile (its bytes still going out): as
  // _abandon.
  async _expire() {
    const s = this._s;
    if (s.res.headersSent) return this._abandon();
    if (s.committed) {
      // A committed claim's work is outside the database and may still be
      // running (a slow card network): recording it failed and retryable
      // would let the retry the 503 asks for take the key over and do the
      // work again.  The claim stays held (heartbeats go on) until the
      // handler settles it (its answer goes to the key, for the retry to
      // replay); the retry meanwhile waits (awaitResult) or gets 409.  A
      // handler that has not settled it another timeout later is given up
      // (_lapse).
      s.timedOut = true;
      s.cfg.log.error(`pg-idempotency: the handler did not answer within ${s.cfg.timeout} s; the committed claim of key ${JSON.stringify(s.key)} stays held until it does (at most ${s.cfg.timeout} s more)`);
      sendProblem(s.res, 503, 'Request timed out',
        'The request is still being processed. Retry it with the same Idempotency-Key.', { 'Retry-After': '1' });
      s.report('timeout', 503, null);
      s.timer = setTimeout(() => this._lapse().catch((err) => s.cfg.log.error('pg-idempotency:', err)),
        s.cfg.timeout * 1000);
      s.timer.unref();
      return;
    }
    if (!this._begin()) return;
    s.cfg.log.error(`pg-idempotency: the handler did not answer within ${s.cfg.timeout} s; the claim of key ${JSON.stringify(s.key)} is undone`);
    await this._undo();
    sendProblem(s.res, 503, 'Request timed out',
      'The request was not completed in time. Retry it with the same Idempotency-Key.', { 'Retry-After': '1' });
    s.report('timeout', 503, null);
  }

  // A committed claim whose handler has not settled it a second timeout
  // after the first (a remote call that never returns): given up without
  // idem_fail, which would let a retry take the key over while that call
  // may still go through.  Its heartbeats stop, so the lease lapses and a
  // retry then takes the key over (reclaimed, at its recovery point); its
  // transaction, if the handler began one, is rolled back and its
  // connection given back; the handler's later calls are refused (55000).
  async _lapse() {
    const s = this._s;
    if (!this._begin()) return;
    s.lapsed = true;
    // a renewal in flight (waiting for heartbeatPool) lands first: from the
    // log line on, nothing renews the lease
    await s.beating;
    s.cfg.log.error(`pg-idempotency: the handler of key ${JSON.stringify(s.key)} did not settle its committed claim within ${2 * s.cfg.timeout} s; its heartbeats stop, its lease (${s.cfg.lease} s) lapses`);
    if (s.db) {
      const bad = await s.db.query('ROLLBACK').then(() => undefined, (err) => err);
      this._release(bad);
    }
  }

  // Settles a claim whose handler answered without respond/fail/error:
  // undone as fail() does.
  async _abandon() {
    const s = this._s;
    if (!this._begin()) return;
    await this._undo();
    s.report(s.claim.outcome, s.res.headersSent ? s.res.statusCode : 500, null);
  }
}

function answerError(res, e) {
  const p = e.problem();
  sendProblem(res, p.status, p.title, p.detail, e.retryAfter ? { 'Retry-After': String(e.retryAfter) } : {});
}

// Reads the body (Content-Type, size, JSON) and calls back with
// { body, rawBody } or { problem }.
function readBody(req, maxBody, done) {
  const type = req.headers['content-type'] || '';
  if (!/^application\/json\s*(;|$)/i.test(type))
    return done({ problem: { status: 415, title: 'Unsupported Content-Type', detail: 'Send the request as application/json.' } });
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size <= maxBody) chunks.push(chunk);
  });
  req.on('error', () => {});
  req.on('end', () => {
    if (size > maxBody)
      return done({ problem: { status: 413, title: 'Body too large', detail: `At most ${maxBody} bytes.` } });
    const text = Buffer.concat(chunks).toString('utf8');
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      return done({ problem: { status: 400, title: 'Malformed JSON', detail: 'The body is not valid JSON.' } });
    }
    return done({ body, rawBody: text });
  });
}

// The middleware.  Options (only pool is required):
//   pool             pg Pool for claims and the handler's work
//   heartbeatPool    pg Pool of its own for heartbeats (default: pool; give
//                    one: with the request pool busy, leases would lapse)
//   scope(req)       the scope of the request's keys, from the
//                    authenticated caller (string, or a promise of one;
//                    throw {status, title, detail} to refuse); default
//                    req.idempotencyScope, else ''
//   scopeFromHeader  a header to read the scope from (absent: ''): only
//                    where the header is trusted
//   validate(body)   checks the parsed body before the claim: null, or a
//                    string (422 'Invalid request'), or {status, title, detail}
//   committed(req)   true: claim committed, with a lease (work outside the database)
//   lease            seconds (30); heartbeatEvery seconds (lease / 3)
//   waitForDuplicates  true (default): a duplicate waits for the first
//                    transaction; false: 409 at once
//   awaitResult      seconds (3): a duplicate of a committed claim in flight
//                    waits this long for its result, then 409
//   maxBody          bytes (64 KiB)
//   timeout          seconds (60) the handler has to answer a claim; past
//                    them it is answered 503, a claim in a transaction
//                    undone, a committed one held another timeout for the
//                    handler to settle, then left to lapse; 0: never
//   onOutcome(event) called once per request: { outcome, status, key,
//                    scope, committed, sqlstate, elapsed, claimElapsed }
//   log              where errors go (console)
function idempotency(options = {}) {
  if (!options.pool || typeof options.pool.connect !== 'function')
    throw new TypeError('pg-idempotency: options.pool must be a pg Pool');
  if (options.scope && options.scopeFromHeader)
    throw new TypeError('pg-idempotency: give scope or scopeFromHeader, not both');
  const lease = option(options.lease, 30, 'lease', 1);
  const cfg = {
    pool: options.pool,
    heartbeatPool: options.heartbeatPool || options.pool,
    lease,
    heartbeatEvery: option(options.heartbeatEvery, Math.min(lease / 3, TIMER_MAX), 'heartbeatEvery', 0.01, TIMER_MAX),
    wait: options.waitForDuplicates !== false,
    awaitResult: option(options.awaitResult, 3, 'awaitResult', 0),
    maxBody: option(options.maxBody, 64 * 1024, 'maxBody', 0),
    timeout: option(options.timeout, 60, 'timeout', 0, TIMER_MAX),
    validate: options.validate || null,
    committed: options.committed || null,
    onOutcome: options.onOutcome || null,
    log: options.log || console,
  };
  // a renewal once a lease or less often lets every committed claim's lease
  // lapse between two, and a retry take its key over
  if (cfg.heartbeatEvery >= lease)
    throw new TypeError('pg-idempotency: heartbeatEvery must be below lease');
  const header = options.scopeFromHeader ? String(options.scopeFromHeader).toLowerCase() : null;
  const scopeOf = header
    ? (req) => req.headers[header] ?? ''
    : options.scope || ((req) => req.idempotencyScope ?? '');

  return function idempotencyMiddleware(req, res, next) {
    const t0 = process.hrtime.bigint();
    const key = req.headers['idempotency-key'];
    const state = {
      cfg, req, res, key: typeof key === 'string' ? key : '', scope: '', committed: false,
      claim: null, claimElapsed: null, db: null, opening: null, guard: null, beat: null, timer: null, lost: false,
      beating: null, unstorable: false, lapsed: false, hadTx: false,
      settled: false, timedOut: false, reported: false,
    };
    state.report = (outcome, status, sqlstate) => {
      // once per request: a committed claim settled after its timeout's
      // 503 (the handler's late answer) is not reported again
      if (!cfg.onOutcome || state.reported) return;
      state.reported = true;
      try {
        cfg.onOutcome({
          outcome, status, key: state.key, scope: state.scope, committed: state.committed,
          sqlstate: sqlstate || null, elapsed: elapsedMs(t0), claimElapsed: state.claimElapsed,
        });
      } catch (err) {
        cfg.log.error('pg-idempotency: onOutcome failed:', err);
      }
    };
    const reject = (p) => {
      sendProblem(res, p.status, p.title, p.detail);
      state.report('rejected', p.status, null);
    };
    if (state.key === '')
      return reject({ status: 400, title: 'Idempotency-Key header missing',
        detail: `${req.method} ${(req.originalUrl || req.url).split('?')[0]} needs an Idempotency-Key header.` });
    readBody(req, cfg.maxBody, (read) => {
      if (read.problem) return reject(read.problem);
      Promise.resolve()
        .then(() => {
          if (cfg.validate) {
            const wrong = cfg.validate(read.body);
            if (wrong) throw Object.assign(new Error('invalid'), { problem: asProblem(wrong, 422, 'Invalid request') });
          }
          return scopeOf(req);
        })
        .then((scope) => {
          if (typeof scope !== 'string')
            throw Object.assign(new Error('scope'), { problem: { status: 400, title: 'Invalid scope', detail: 'The scope must be a string.' } });
          state.scope = scope;
          state.committed = Boolean(cfg.committed && cfg.committed(req));
          return claimAndRun(state, read, next);
        }, (err) => {
          if (err && err.problem) return reject(err.problem);
          if (err && typeof err.status === 'number' && err.title)
            return reject(asProblem(err, err.status, err.title));
          cfg.log.error('pg-idempotency: scope or validate failed:', err);
          sendProblem(res, 500, 'Internal error', 'The request was not processed.');
          state.report('error', 500, null);
        });
    });
  };
}

async function claimAndRun(state, read, next) {
  const { cfg, req, res } = state;
  let db = null;
  let claim;
  const c0 = process.hrtime.bigint();
  try {
    if (state.committed) {
      // committed at once: a duplicate of a request at its remote call
      // waits for its result (await_result) and gets the first answer
      claim = await client.claim(cfg.pool, state.key, read.rawBody, state.scope,
        { lease: cfg.lease, wait: true, awaitResult: cfg.awaitResult });
    } else {
      db = await connect(cfg.pool);
      await db.query('BEGIN');
      claim = await client.claim(db, state.key, read.rawBody, state.scope,
        { lease: cfg.lease, wait: cfg.wait, awaitResult: 0 });
    }
  } catch (err) {
    state.claimElapsed = elapsedMs(c0);
    const e = IdempotencyError.from(err);
    if (db) {
      const bad = await db.query('ROLLBACK').then(() => undefined, (x) => x);
      db.release(bad);
    }
    if (e.status === 500) cfg.log.error('pg-idempotency: claim failed:', e.cause || e);
    answerError(res, e);
    return state.report(e.kind === 'request_mismatch' ? 'mismatch' : 'error', e.status, e.code);
  }
  state.claimElapsed = elapsedMs(c0);
  if (claim.outcome !== 'new' && claim.outcome !== 'reclaimed') {
    if (db) {
      const bad = await db.query('COMMIT').then(() => undefined, (x) => x);
      db.release(bad);
      if (bad) {
        const e = IdempotencyError.from(bad);
        answerError(res, e);
        return state.report('error', e.status, e.code);
      }
    }
    if (claim.outcome === 'replay') {
      // no stored status: a key completed by SQL is a success; a failed one
      // (idem_fail without a code, attempts_exhausted) is not
      const code = claim.responseCode ?? (claim.status === 'failed' ? 500 : 200);
      sendStored(res, code, claim.response, true);
      return state.report('replay', code, null);
    }
    // in_progress, or stale (idempotency.stale_policy = 'hold')
    sendProblem(res, 409, 'A request with this Idempotency-Key is being processed',
      claim.outcome === 'stale'
        ? 'An earlier attempt stopped midway; an operator must settle it.'
        : 'Retry after the time in Retry-After.',
      { 'Retry-After': String(Math.max(1, claim.retryAfter || 1)) });
    return state.report('in_progress', 409, null);
  }
  state.claim = claim;
  state.db = db;
  state.body = read.body;
  state.rawBody = read.rawBody;
  if (state.committed) {
    // One heartbeat of the claim at a time: a tick while the last one still
    // waits (for a connection of heartbeatPool, or the server) is skipped,
    // or a busy pool's queue would grow by one per claim at every tick.
    // state.beating: the renewal in flight, or null.
    state.beat = setInterval(() => {
      if (state.beating || state.lost) return;
      state.beating = client.heartbeat(cfg.heartbeatPool, state.key, state.scope, claim.token, cfg.lease).catch((err) => {
        if (err.kind === 'stale_token' || err.kind === 'not_processing') state.lost = true;
        else cfg.log.error('pg-idempotency: heartbeat failed:', err.message);
      }).finally(() => { state.beating = null; });
    }, cfg.heartbeatEvery * 1000);
    // the server's connections keep the process alive, not the heartbeats
    // of a claim whose answer waits for a pool that has ended
    state.beat.unref();
  }
  const handle = new Claim(state);
  req.idempotency = handle;
  req.body = read.body;
  // A handler that answered some other way (or an error handler did): the
  // claim is settled all the same.  A client that went away before any
  // answer changes nothing: the handler's work goes on and settles it.
  res.on('close', () => {
    if (res.headersSent && !state.timedOut) handle._abandon().catch((err) => cfg.log.error('pg-idempotency:', err));
  });
  if (cfg.timeout > 0) {
    state.timer = setTimeout(() => handle._expire().catch((err) => cfg.log.error('pg-idempotency:', err)),
      cfg.timeout * 1000);
    state.timer.unref();
  }
  next();
}

module.exports = { idempotency, Claim, sendProblem };
