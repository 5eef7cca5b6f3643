'use strict';
// What the tests share: a pool on the database the environment names
// (PGHOST, PGPORT, PGUSER, PGDATABASE: one set up by
// examples/db/schema.sql, as the role it granted), an Express app with the
// middleware on a free loopback port, and requests to it.

const http = require('node:http');
const { randomUUID } = require('node:crypto');
const express = require('express');
const { Pool } = require('pg');

const newPool = (max = 4, options = {}) => {
  const pool = new Pool({ max, ...options });
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

// A TCP proxy to the server the environment names (PGHOST, PGPORT: TCP),
// for a client that sends no SSLRequest: once armed, the next COMMIT is
// sent on to the server, and when the server answers it (it has
// committed) the client's connection is cut instead: a COMMIT whose
// outcome the client cannot know.  Resolves to { port, arm(), cuts,
// close() }.
async function commitCutter() {
  const net = require('node:net');
  const conns = new Set();
  const proxy = { port: 0, armed: false, cuts: 0 };
  const server = net.createServer((c) => {
    const s = net.connect(Number(process.env.PGPORT || 5432), process.env.PGHOST || '127.0.0.1');
    conns.add(c);
    conns.add(s);
    let buf = Buffer.alloc(0);
    let started = false;
    let sent = false; // a COMMIT sent to be cut
    const cut = () => { c.destroy(); s.destroy(); };
    c.on('error', () => {});
    s.on('error', () => {});
    c.on('close', () => s.destroy());
    s.on('close', () => c.destroy());
    s.on('data', (d) => { if (sent) { proxy.cuts++; cut(); } else c.write(d); });
    c.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        // the startup message has no type byte; each after it one
        const head = started ? 1 : 0;
        if (buf.length < head + 4) return;
        const len = head + buf.readInt32BE(head);
        if (buf.length < len) return;
        const msg = buf.subarray(0, len);
        buf = buf.subarray(len);
        if (started && proxy.armed && msg[0] === 0x51 && /^COMMIT\b/i.test(msg.toString('latin1', 5))) {
          proxy.armed = false;
          sent = true;
        }
        started = true;
        s.write(msg);
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.port = server.address().port;
  proxy.arm = () => { proxy.armed = true; };
  proxy.close = () => new Promise((resolve) => {
    conns.forEach((x) => x.destroy());
    server.close(resolve);
  });
  return proxy;
}

module.exports = { newPool, newKey, serve, post, keyRow, paymentsFor, deferred, commitCutter };
