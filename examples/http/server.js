'use strict';
// A small payments service whose POST /payments honours the Idempotency-Key
// header as the IETF httpapi idempotency-key draft describes, with the
// idempotency extension doing the work inside PostgreSQL:
//   400  no Idempotency-Key (problem+json)
//   409  the first request with this key is still in flight (Retry-After)
//   422  the key was used with a different body (problem+json)
//   the stored status and body on a replay, with Idempotent-Replayed: true
// The default mode claims the key, inserts the payment and records the
// response in one transaction.  ?mode=card calls a slow fake card network
// outside the transaction: the claim is committed with a lease, kept alive
// by heartbeats, and the result is recorded with the claim's fencing token.
//
// Connection settings come from the usual PG* environment variables; the
// database needs CREATE EXTENSION idempotency and the payments table
// (schema.sql).  PORT (default 3000), CARD_DELAY_MS (default 1500),
// LEASE (default '3 seconds').

const express = require('express');
const { Pool } = require('pg');

const pool = new Pool({ max: 30 });
const app = express();
app.use(express.json());

const CARD_DELAY_MS = Number(process.env.CARD_DELAY_MS || 1500);
const LEASE = process.env.LEASE || '3 seconds';

function problem(res, status, title, detail, headers = {}) {
  res.set(headers);
  res.status(status).type('application/problem+json')
    .send(JSON.stringify({ type: 'about:blank', title, status, detail }));
}

// The answer to a claim that found the key already there
function answerExisting(res, claim) {
  if (claim.outcome === 'replay') {
    res.set('Idempotent-Replayed', 'true');
    return res.status(claim.response_code).json(claim.response);
  }
  // in_progress, or stale (held for an operator)
  return problem(res, 409, 'A request with this Idempotency-Key is being processed',
    claim.outcome === 'stale'
      ? 'The first attempt stopped midway; an operator must settle it.'
      : 'Retry after the indicated time.',
    { 'Retry-After': String(Math.max(1, claim.retry_after_s || 1)) });
}

function answerError(res, err) {
  if (err.code === 'IK001')
    return problem(res, 422, 'Idempotency-Key reused with a different request body', err.detail);
  if (err.code === '22004' || err.code === '22023')
    return problem(res, 400, 'Invalid Idempotency-Key', err.message);
  if (err.code === 'IK002')
    return problem(res, 409, 'This attempt lost its claim', err.detail);
  return problem(res, 500, 'Internal error', err.message);
}

const CLAIM = `SELECT outcome, token, response_code, response,
                      ceil(extract(epoch FROM retry_after))::int AS retry_after_s
               FROM idem_claim($1, $2, $3, lease => $4)`;

// The in-transaction pattern: claim, pay, record, commit.
async function payInTransaction(client, key, scope, body, res) {
  await client.query('BEGIN');
  const claim = (await client.query(CLAIM, [key, body, scope, LEASE])).rows[0];
  if (claim.outcome !== 'new' && claim.outcome !== 'reclaimed') {
    await client.query('COMMIT');
    return answerExisting(res, claim);
  }
  const payment = (await client.query(
    'INSERT INTO payments (order_id, amount) VALUES ($1, $2) RETURNING id',
    [String(body.order), Number(body.amount)])).rows[0];
  const response = { payment_id: Number(payment.id), order: body.order, amount: body.amount };
  await client.query('SELECT idem_complete($1, 201, $2, $3)', [key, response, scope]);
  await client.query('COMMIT');
  return res.status(201).json(response);
}

// The cross-transaction pattern: the card network is called with the claim
// committed, under a lease kept alive by heartbeats and fenced by the token.
async function payWithCard(client, key, scope, body, res) {
  const claim = (await client.query(CLAIM, [key, body, scope, LEASE])).rows[0];
  if (claim.outcome !== 'new' && claim.outcome !== 'reclaimed')
    return answerExisting(res, claim);
  const token = claim.token;
  const beat = setInterval(() => {
    pool.query('SELECT idem_heartbeat($1, $2, $3, $4)', [key, scope, token, LEASE]).catch(() => {});
  }, 500);
  try {
    await new Promise((resolve) => setTimeout(resolve, CARD_DELAY_MS));   // the card network
  } finally {
    clearInterval(beat);
  }
  await client.query('BEGIN');
  const payment = (await client.query(
    'INSERT INTO payments (order_id, amount) VALUES ($1, $2) RETURNING id',
    [String(body.order), Number(body.amount)])).rows[0];
  const response = { payment_id: Number(payment.id), order: body.order, amount: body.amount, card: 'authorized' };
  await client.query('SELECT idem_complete($1, 201, $2, $3, $4)', [key, response, scope, token]);
  await client.query('COMMIT');
  return res.status(201).json(response);
}

app.post('/payments', async (req, res) => {
  const key = req.get('Idempotency-Key');
  if (!key)
    return problem(res, 400, 'Idempotency-Key header missing',
      'POST /payments needs an Idempotency-Key header.');
  const scope = req.get('Merchant-Id') || '';
  const client = await pool.connect();
  try {
    if (req.query.mode === 'card')
      await payWithCard(client, key, scope, req.body || {}, res);
    else
      await payInTransaction(client, key, scope, req.body || {}, res);
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    answerError(res, err);
  } finally {
    client.release();
  }
});

const server = app.listen(Number(process.env.PORT || 3000), '127.0.0.1', () => {
  console.log(`listening on 127.0.0.1:${server.address().port}`);
});
