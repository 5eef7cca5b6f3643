'use strict';
// A payments service whose POST /payments honours the Idempotency-Key header
// (IETF httpapi idempotency-key draft), with the idempotency extension doing
// the work inside PostgreSQL.  README.md beside this file explains it; the
// conformance suite (../conformance) checks it over HTTP.
//
//   POST /payments            claim, insert the payment, record the response:
//                             one transaction
//   POST /payments?mode=card  claim committed with a lease, card network
//                             called outside any transaction (heartbeats on
//                             their own connections, recovery points), then
//                             payment and response in one transaction,
//                             fenced by the claim's token
//   GET  /healthz             200 when the database answers
//
// Environment: HOST (127.0.0.1), PORT (3000; 0 picks a free one), the PG*
// variables of libpq (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE),
// POOL_SIZE (20), LEASE_SECONDS (30), HEARTBEAT_SECONDS (LEASE_SECONDS / 3),
// CARD_NETWORK_URL (http://127.0.0.1:4000), WAIT_FOR_DUPLICATES (true),
// AWAIT_RESULT_SECONDS (3).

const http = require('node:http');
const express = require('express');
const { Pool } = require('pg');

function envNumber(name, fallback, min) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) {
    console.error(`${name} must be a number >= ${min}, not '${raw}'`);
    process.exit(2);
  }
  return n;
}

const HOST = process.env.HOST || '127.0.0.1';
const PORT = envNumber('PORT', 3000, 0);
const POOL_SIZE = envNumber('POOL_SIZE', 20, 1);
const LEASE_SECONDS = envNumber('LEASE_SECONDS', 30, 1);
const HEARTBEAT_SECONDS = envNumber('HEARTBEAT_SECONDS', LEASE_SECONDS / 3, 0.1);
// Card mode: a retry that arrives while the first request is at the card
// network waits up to this long (holding a pool connection, no lock) for
// its result, and answers 201 with it instead of 409; 0 answers 409 at once.
const AWAIT_RESULT_SECONDS = envNumber('AWAIT_RESULT_SECONDS', 3, 0);
const CARD_NETWORK_URL = (process.env.CARD_NETWORK_URL || 'http://127.0.0.1:4000').replace(/\/+$/, '');
const MAX_BODY = 64 * 1024;
if (!['true', 'false', undefined, ''].includes(process.env.WAIT_FOR_DUPLICATES)) {
  console.error('WAIT_FOR_DUPLICATES must be true or false');
  process.exit(2);
}
// Default mode: a duplicate of a request whose transaction is still open
// waits for it (holding a pool connection) and then replays (true), or is
// answered 409 + Retry-After at once (false).  README.md: which to choose.
const WAIT_FOR_DUPLICATES = process.env.WAIT_FOR_DUPLICATES !== 'false';

// Requests use this pool.  Heartbeats have their own: when every request
// connection is busy (or waiting for a duplicate), the leases of the card
// payments in flight must still be renewed, or another instance takes the
// keys over and the card is authorized twice.
const pool = new Pool({ max: POOL_SIZE });
const heartbeatPool = new Pool({ max: 2 });
for (const p of [pool, heartbeatPool])
  p.on('error', (err) => console.error('idle connection lost:', err.message));

// ---- answers ---------------------------------------------------------------

function problem(res, status, title, detail, headers = {}) {
  res.set(headers);
  res.status(status).type('application/problem+json')
    .send(JSON.stringify({ type: 'about:blank', title, status, detail }));
}

// The body is always text produced by PostgreSQL (jsonb output), never a
// JavaScript object serialized here: the first answer and every replay are
// the same bytes.
function sendStored(res, code, text, replayed) {
  if (replayed) res.set('Idempotent-Replayed', 'true');
  res.status(code);
  if (text === null) return res.end();
  return res.type('application/json').send(text);
}

// What a claim that is not ours answers.
function answerExisting(res, claim) {
  if (claim.outcome === 'replay')
    return sendStored(res, claim.response_code, claim.response, true);
  // in_progress, or stale (idempotency.stale_policy = 'hold')
  return problem(res, 409, 'A request with this Idempotency-Key is being processed',
    claim.outcome === 'stale'
      ? 'An earlier attempt stopped midway; an operator must settle it.'
      : 'Retry after the time in Retry-After.',
    { 'Retry-After': String(Math.max(1, claim.retry_after_s || 1)) });
}

// Database errors with a meaning for the client; anything else is logged and
// answered 500 without details.
function answerError(res, err) {
  switch (err.code) {
    case 'IK001':
      return problem(res, 422, 'Idempotency-Key reused with a different request body', err.detail);
    case '22004':
    case '22023':
      return problem(res, 400, 'Invalid Idempotency-Key or Merchant-Id', err.message);
    case 'IK002':
    case 'IK003':
      return problem(res, 409, 'This attempt lost its claim on the Idempotency-Key',
        'Another attempt took the key over; retry to get its result.', { 'Retry-After': '1' });
    case '25006':
      return problem(res, 503, 'Database is read-only', 'Retry later.', { 'Retry-After': '1' });
    default:
      // other data exceptions (class 22): PostgreSQL refused the body as
      // jsonb (a \u0000 in a string, a number out of numeric's range)
      if (typeof err.code === 'string' && err.code.startsWith('22'))
        return problem(res, 400, 'Invalid request', 'PostgreSQL did not accept the body.');
      console.error('request failed:', err);
      if (!res.headersSent) return problem(res, 500, 'Internal error', 'The payment was not made.');
  }
}

// ---- input -----------------------------------------------------------------

// The payment in a request body, or a string saying what is wrong.
function validatePayment(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    return 'The body must be a JSON object.';
  if (typeof body.order !== 'string' || body.order === '' || [...body.order].length > 64)
    return '"order" must be a string of 1 to 64 characters.';
  if (!Number.isSafeInteger(body.amount) || body.amount < 1 || body.amount > 1e12)
    return '"amount" must be an integer from 1 to 1000000000000 (minor units).';
  if (body.currency !== undefined && !(typeof body.currency === 'string' && /^[A-Z]{3}$/.test(body.currency)))
    return '"currency", when given, must be three capital letters.';
  return null;
}

// Reads the body itself (express.json would answer malformed JSON with an
// HTML page) and checks everything before any key is claimed: a bad request
// never leaves a key behind.  Sets req.payment and req.rawBody.
function readPayment(req, res, next) {
  const type = req.get('Content-Type') || '';
  if (!/^application\/json\s*(;|$)/i.test(type))
    return problem(res, 415, 'Unsupported Content-Type', 'Send the payment as application/json.');
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size <= MAX_BODY) chunks.push(chunk);
  });
  req.on('error', () => {});
  req.on('end', () => {
    if (size > MAX_BODY)
      return problem(res, 413, 'Body too large', `At most ${MAX_BODY} bytes.`);
    const text = Buffer.concat(chunks).toString('utf8');
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      return problem(res, 400, 'Malformed JSON', 'The body is not valid JSON.');
    }
    const wrong = validatePayment(body);
    if (wrong) return problem(res, 422, 'Invalid payment', wrong);
    req.payment = body;
    req.rawBody = text;
    return next();
  });
}

// ---- the database ----------------------------------------------------------

// The claim's response comes back as text (response::text), so that a replay
// sends exactly what PostgreSQL stored.
const CLAIM = `SELECT outcome, token::text AS token, response_code, response::text AS response,
                      recovery_point, ceil(extract(epoch FROM retry_after))::int AS retry_after_s
               FROM idem_claim($1, $2::jsonb, $3, lease => make_interval(secs => $4), wait => $5,
                               await_result => make_interval(secs => $6))`;

// Inserts the payment and returns the response as PostgreSQL's jsonb text.
const INSERT_PAYMENT = `
  WITH p AS (INSERT INTO payments (scope, order_id, amount, currency, authorization_id)
             VALUES ($1, $2, $3, $4, $5) RETURNING *)
  SELECT jsonb_strip_nulls(jsonb_build_object('payment_id', id, 'order', order_id, 'amount', amount,
                           'currency', currency, 'authorization_id', authorization_id))::text AS response
  FROM p`;

async function insertPayment(client, scope, payment, authorization) {
  const r = await client.query(INSERT_PAYMENT,
    [scope, payment.order, payment.amount, payment.currency ?? null, authorization]);
  return r.rows[0].response;
}

// ---- default mode: one transaction -------------------------------------

// Claim, pay, record, commit.  A duplicate of a request still in its
// transaction waits for it (holding its pool connection) and then replays,
// or with WAIT_FOR_DUPLICATES=false gets 409 at once.
async function payInTransaction(req, res, key, scope) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const claim = (await client.query(CLAIM,
      [key, req.rawBody, scope, LEASE_SECONDS, WAIT_FOR_DUPLICATES, 0])).rows[0];
    if (claim.outcome !== 'new' && claim.outcome !== 'reclaimed') {
      await client.query('COMMIT');
      return answerExisting(res, claim);
    }
    const response = await insertPayment(client, scope, req.payment, null);
    await client.query('SELECT idem_complete($1, 201, $2::jsonb, $3)', [key, response, scope]);
    await client.query('COMMIT');
    return sendStored(res, 201, response, false);
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

// ---- card mode: across transactions ----------------------------------------

class CardNetworkError extends Error {}

async function cardCall(method, path, body) {
  let r;
  try {
    r = await fetch(CARD_NETWORK_URL + path, {
      method,
      headers: body ? { 'Content-Type': 'application/json' } : {},
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(60000),
    });
  } catch (err) {
    throw new CardNetworkError(`card network unreachable: ${err.message}`);
  }
  if (method === 'GET' && r.status === 404) return null;
  if (!r.ok) throw new CardNetworkError(`card network answered ${r.status}`);
  const answer = await r.json().catch(() => ({}));
  if (typeof answer.authorization_id !== 'string')
    throw new CardNetworkError('card network answered without an authorization_id');
  return answer.authorization_id;
}

// The card network authorizes once per reference; a lookup asks whether an
// authorization for the reference exists (and authorizes nothing).
const authorize = (scope, key, amount) =>
  cardCall('POST', '/authorizations', { merchant: scope, idempotency_key: key, amount });
const lookUpAuthorization = (scope, key) =>
  cardCall('GET', `/authorizations?${new URLSearchParams({ merchant: scope, idempotency_key: key })}`);

// Renews the lease every HEARTBEAT_SECONDS on the heartbeat pool until
// stopped.  lost is set when the claim was taken over (IK002/IK003).
function startHeartbeat(key, scope, token) {
  const beat = { lost: false };
  beat.timer = setInterval(() => {
    heartbeatPool.query('SELECT idem_heartbeat($1, $2, $3::bigint, make_interval(secs => $4))',
      [key, scope, token, LEASE_SECONDS])
      .catch((err) => {
        if (err.code === 'IK002' || err.code === 'IK003') beat.lost = true;
        else console.error('heartbeat failed:', err.message);
      });
  }, HEARTBEAT_SECONDS * 1000);
  return beat;
}

const checkpoint = (key, scope, token, point) =>
  pool.query('SELECT idem_checkpoint($1, $2, $3, $4::bigint)', [key, point, scope, token]);

// Claim (committed, with a lease), authorize the card unless an earlier
// attempt did, then insert the payment and complete with the token in one
// transaction.  Recovery points: 'authorizing' before the card call (a retry
// that finds it asks the card network whether the call went through),
// 'authorized:<id>' after it (a retry that finds it uses the id and calls
// nothing).
async function payWithCard(req, res, key, scope) {
  // A duplicate of a payment at the card network waits for its result
  // (await_result), so that a client's retry gets the first answer.
  const claim = (await pool.query(CLAIM,
    [key, req.rawBody, scope, LEASE_SECONDS, true, AWAIT_RESULT_SECONDS])).rows[0];
  if (claim.outcome !== 'new' && claim.outcome !== 'reclaimed')
    return answerExisting(res, claim);
  const token = claim.token;
  const beat = startHeartbeat(key, scope, token);
  try {
    let authorization = null;
    const point = claim.recovery_point || '';
    if (point.startsWith('authorized:')) {
      authorization = point.slice('authorized:'.length);
    } else {
      if (point === 'authorizing')
        authorization = await lookUpAuthorization(scope, key);
      if (authorization === null) {
        // also a fence: IK002 here if another attempt took the key over
        await checkpoint(key, scope, token, 'authorizing');
        authorization = await authorize(scope, key, req.payment.amount);
      }
      await checkpoint(key, scope, token, 'authorized:' + authorization);
    }
    const client = await pool.connect();
    let response;
    try {
      await client.query('BEGIN');
      response = await insertPayment(client, scope, req.payment, authorization);
      await client.query('SELECT idem_complete($1, 201, $2::jsonb, $3, $4::bigint)',
        [key, response, scope, token]);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
    return sendStored(res, 201, response, false);
  } catch (err) {
    if (!(err instanceof CardNetworkError)) throw err;
    // The attempt is recorded as failed, retryable: the next request with
    // this key takes it over (and finds the recovery point).
    await pool.query('SELECT idem_fail($1, $2, $3::bigint)', [key, scope, token]).catch(() => {});
    console.error(err.message);
    return problem(res, 502, 'Card network unavailable', 'Retry with the same Idempotency-Key.',
      { 'Retry-After': '1' });
  } finally {
    clearInterval(beat.timer);
  }
}

// ---- the application -------------------------------------------------------

const app = express();
app.disable('x-powered-by');

app.get('/healthz', (req, res, next) => {
  pool.query('SELECT 1').then(() => res.type('text/plain').send('ok'), next);
});

app.post('/payments', (req, res, next) => {
  // Checked before the body is read; the body is checked before the claim.
  const key = req.get('Idempotency-Key');
  if (key === undefined || key === '')
    return problem(res, 400, 'Idempotency-Key header missing',
      'POST /payments needs an Idempotency-Key header.');
  const mode = req.query.mode;
  if (mode !== undefined && mode !== 'card')
    return problem(res, 400, 'Unknown mode', 'mode is either absent or card.');
  return readPayment(req, res, next);
}, (req, res) => {
  const key = req.get('Idempotency-Key');
  const scope = req.get('Merchant-Id') || '';
  const pay = req.query.mode === 'card' ? payWithCard : payInTransaction;
  pay(req, res, key, scope).catch((err) => answerError(res, err));
});

app.use((req, res) => problem(res, 404, 'Not found', `No route for ${req.method} ${req.path}.`));

// Last resort (express's own handler answers HTML with a stack trace).
// eslint-disable-next-line no-unused-vars
app.use((err, req, res, next) => {
  console.error('unhandled:', err);
  if (!res.headersSent) problem(res, 500, 'Internal error', 'The request was not processed.');
});

const server = http.createServer(app);
server.listen(PORT, HOST, () => {
  const a = server.address();
  console.log(`listening on http://${a.address}:${a.port}`);
});

function shutdown() {
  server.close(() => Promise.all([pool.end(), heartbeatPool.end()]).then(() => process.exit(0)));
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
