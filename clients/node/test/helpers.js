'use strict';
// What the tests share: a pool on the database the environment names
// (PGHOST, PGPORT, PGUSER, PGDATABASE: one set up by
// examples/db/schema.sql, as the role it granted), an Express app with the
// middleware on a free loopback port, and requests to it.

const http = require('node:http');
const { randomUUID } = require('node:crypto');
const express = require('express');
const { Pool } = require('pg');

const newPool = (max = 4) => {
  const pool = new Pool({ max });
  pool.on('error', () => {});
  return pool;
};

const newKey = () => `test-${randomUUID()}`;

// An app with the middleware (options) in front of handler on POST /pay.
async function serve(middleware, handler) {
  const app = express();
  app.post('/pay', middleware, handler);
  // eslint-disable-next-line no-unused-vars
  app.use((err, req, res, next) => {
    res.status(500).type('text/plain').send('handler failed');
  });
  const server = http.createServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    base,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(resolve);
    }),
  };
}

// POST base + path (signal: an AbortSignal, to bound a request that may
// never be answered); resolves to { status, headers, text, json }.
async function post(base, { key, body, path = '/pay', contentType = 'application/json', headers = {}, signal }) {
  const h = { ...headers };
  if (key !== undefined) h['Idempotency-Key'] = key;
  if (contentType !== null) h['Content-Type'] = contentType;
  const r = await fetch(base + path, {
    method: 'POST', headers: h, body: typeof body === 'string' ? body : JSON.stringify(body), signal,
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

// The key's row, or null.
async function keyRow(pool, key, scope = '') {
  const r = await pool.query(
    'SELECT status, response_code, recovery_point FROM idempotency_keys WHERE key = $1 AND scope = $2',
    [key, scope]);
  return r.rows[0] || null;
}

async function paymentsFor(pool, scope, order) {
  const r = await pool.query('SELECT count(*)::int AS n FROM payments WHERE scope = $1 AND order_id = $2',
    [scope, order]);
  return r.rows[0].n;
}

// A promise with its resolve function outside.
function deferred() {
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  return { promise, resolve };
}

module.exports = { newPool, newKey, serve, post, keyRow, paymentsFor, deferred };
