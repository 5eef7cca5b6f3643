'use strict';
// A payments service whose POST /payments honours the Idempotency-Key header
// (IETF httpapi idempotency-key draft), with the idempotency extension doing
// the work inside PostgreSQL through the pg-idempotency library
// (../../clients/node): this file is the payment, the library the key.
// README.md beside this file explains it; the conformance suite
// (../conformance) checks it over HTTP.
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
// the library (clients/node, npm package pg-idempotency): the middleware
// that claims the key, replays, and answers the HTTP contract's errors
const { idempotency, sendProblem } = require('../../clients/node');

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

// ---- input -----------------------------------------------------------------

// The payment in a request body, or a problem saying what is wrong (the
// library answers it 422 before any key is claimed).
function validatePayment(body) {
  const wrong = (detail) => ({ status: 422, title: 'Invalid payment', detail });
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    return wrong('The body must be a JSON object.');
  if (typeof body.order !== 'string' || body.order === '' || [...body.order].length > 64)
    return wrong('"order" must be a string of 1 to 64 characters.');
  if (!Number.isSafeInteger(body.amount) || body.amount < 1 || body.amount > 1e12)
    return wrong('"amount" must be an integer from 1 to 1000000000000 (minor units).');
  if (body.currency !== undefined && !(typeof body.currency === 'string' && /^[A-Z]{3}$/.test(body.currency)))
    return wrong('"currency", when given, must be three capital letters.');
  return null;
}

// ---- the database ----------------------------------------------------------

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

// The library claimed the key in a transaction (a duplicate of a request
// still in its transaction waited for it and replayed, or with
// WAIT_FOR_DUPLICATES=false got 409 at once); the payment goes into the
// same transaction, and respond() completes the key, commits and answers.
async function payInTransaction(idem) {
  const response = await insertPayment(await idem.tx(), idem.scope, idem.body, null);
  return idem.respond(201, response);
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

// The library claimed the key committed, with a lease it renews on the
// heartbeat pool (a duplicate of a payment at the card network waits for its
// result: await_result).  Authorize the card unless an earlier attempt did,
// then insert the payment; respond() completes the key with the token in the
// same transaction.  Recovery points: 'authorizing' before the card call (a
// retry that finds it asks the card network whether the call went through),
// 'authorized:<id>' after it (a retry that finds it uses the id and calls
// nothing).
async function payWithCard(idem) {
  const { key, scope } = idem;
  let authorization = null;
  const point = idem.recoveryPoint || '';
  if (point.startsWith('authorized:')) {
    authorization = point.slice('authorized:'.length);
  } else {
    if (point === 'authorizing')
      authorization = await lookUpAuthorization(scope, key);
    if (authorization === null) {
      // also a fence: IK002 here if another attempt took the key over
      await idem.checkpoint('authorizing');
      authorization = await authorize(scope, key, idem.body.amount);
    }
    await idem.checkpoint('authorized:' + authorization);
  }
  const response = await insertPayment(await idem.tx(), scope, idem.body, authorization);
  return idem.respond(201, response);
}

// ---- the application -------------------------------------------------------

const app = express();
app.disable('x-powered-by');

app.get('/healthz', (req, res, next) => {
  pool.query('SELECT 1').then(() => res.type('text/plain').send('ok'), next);
});

// The scope is the Merchant-Id header here, because the tests choose it per
// request.  In production take it from the authenticated caller instead:
// scope: (req) => req.user.merchantId (a caller who picks the header can
// probe another merchant's keys).
const idempotent = idempotency({
  pool,
  heartbeatPool,
  scopeFromHeader: 'Merchant-Id',
  validate: validatePayment,
  committed: (req) => req.query.mode === 'card',
  lease: LEASE_SECONDS,
  heartbeatEvery: HEARTBEAT_SECONDS,
  waitForDuplicates: WAIT_FOR_DUPLICATES,
  awaitResult: AWAIT_RESULT_SECONDS,
  maxBody: MAX_BODY,
});

app.post('/payments', (req, res, next) => {
  const mode = req.query.mode;
  if (mode !== undefined && mode !== 'card')
    return sendProblem(res, 400, 'Unknown mode', 'mode is either absent or card.');
  return next();
}, idempotent, (req) => {
  const idem = req.idempotency;
  const pay = idem.committed ? payWithCard : payInTransaction;
  pay(idem).catch((err) => {
    if (!(err instanceof CardNetworkError)) return idem.error(err);
    // The attempt is recorded as failed, retryable: the next request with
    // this key takes it over (and finds the recovery point).
    console.error(err.message);
    return idem.fail({ status: 502, title: 'Card network unavailable',
      detail: 'Retry with the same Idempotency-Key.', headers: { 'Retry-After': '1' } });
  });
});

app.use((req, res) => sendProblem(res, 404, 'Not found', `No route for ${req.method} ${req.path}.`));

// Last resort (express's own handler answers HTML with a stack trace).
// eslint-disable-next-line no-unused-vars
app.use((err, req, res, next) => {
  console.error('unhandled:', err);
  if (!res.headersSent) sendProblem(res, 500, 'Internal error', 'The request was not processed.');
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
