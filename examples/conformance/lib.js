'use strict';
// Helpers of the conformance suite: start the service under test (any
// language), talk to it over HTTP, look into the database with psql, and a
// fake card network that counts authorizations.  Node's built-in modules
// only.
//
// Environment:
//   EXAMPLE_CMD            the service's command line as a JSON array,
//                          e.g. ["node", "examples/http/server.js"]
//   PGHOST PGPORT PGDATABASE PGUSER PGPASSWORD
//                          passed to the service (PGUSER: its login role)
//   CONFORMANCE_ADMIN_USER the role psql uses for the checks (postgres)
//   CONFORMANCE_TIMEOUT_S  how long a service may take to start (300)
//   CONFORMANCE_LOG        a file the services' output is appended to
const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const assert = require('node:assert/strict');

const ADMIN_USER = process.env.CONFORMANCE_ADMIN_USER || 'postgres';
const START_TIMEOUT_MS = Number(process.env.CONFORMANCE_TIMEOUT_S || 300) * 1000;

// A prefix unique to this run, so that runs against the same database never
// see each other's keys, scopes or orders.
const RUN = `${Date.now().toString(36)}-${process.pid.toString(36)}`;
const uid = (name) => `${RUN}-${name}`;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- the service under test --------------------------------------------

const services = [];

function command() {
  let cmd;
  try {
    cmd = JSON.parse(process.env.EXAMPLE_CMD || '');
  } catch {
    throw new Error('EXAMPLE_CMD must be the service command as a JSON array');
  }
  assert.ok(Array.isArray(cmd) && cmd.length > 0, 'EXAMPLE_CMD: a non-empty JSON array');
  return cmd;
}

// Starts one instance on a free loopback port (PORT=0: the service prints
// "listening on http://HOST:PORT") and waits until GET /healthz answers 200.
async function startService(env = {}) {
  const cmd = command();
  const child = spawn(cmd[0], cmd.slice(1), {
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const svc = { child, output: '', url: null, exited: false };
  services.push(svc);
  const n = services.length;
  const log = (d) => {
    svc.output += d;
    if (process.env.CONFORMANCE_LOG)
      fs.appendFileSync(process.env.CONFORMANCE_LOG, String(d).replace(/^/gm, `[service ${n}] `));
  };
  child.stdout.on('data', log);
  child.stderr.on('data', log);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    svc.exited = true;
    resolve(`${code ?? signal}`);
  }));
  svc.exitedPromise = exited;
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!svc.url) {
    const m = /listening on (http:\/\/\S+)/.exec(svc.output);
    if (m) svc.url = m[1].replace(/\/+$/, '');
    else if (svc.exited) throw new Error(`service exited before listening:\n${svc.output}`);
    else if (Date.now() > deadline) throw new Error(`service did not listen in time:\n${svc.output}`);
    else await sleep(50);
  }
  const host = new URL(svc.url).hostname;
  assert.equal(host, '127.0.0.1', `the service must listen on loopback only, not ${host}`);
  for (;;) {
    try {
      const r = await fetch(`${svc.url}/healthz`, { signal: AbortSignal.timeout(10000) });
      if (r.status === 200) break;
    } catch { /* not yet */ }
    if (svc.exited) throw new Error(`service exited while starting:\n${svc.output}`);
    if (Date.now() > deadline) throw new Error(`service not healthy in time:\n${svc.output}`);
    await sleep(100);
  }
  return svc;
}

// SIGKILL: the process dies at once, whatever it was doing.
async function kill(svc) {
  if (!svc.exited) svc.child.kill('SIGKILL');
  await svc.exitedPromise;
}

async function stopAll() {
  await Promise.all(services.map(kill));
}

// ---- HTTP ----------------------------------------------------------------

// POST /payments.  body: an object (sent as JSON) or raw text (string).
// Returns { status, headers, text, json() }.
async function pay(svc, { key, scope, body, card = false, contentType = 'application/json', headers = {} }) {
  const h = { ...headers };
  if (contentType !== null) h['Content-Type'] = contentType;
  if (key !== undefined && key !== null) h['Idempotency-Key'] = key;
  if (scope !== undefined && scope !== null) h['Merchant-Id'] = scope;
  const r = await fetch(`${svc.url}/payments${card ? '?mode=card' : ''}`, {
    method: 'POST',
    headers: h,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(180000),
  });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: () => JSON.parse(text) };
}

// Sends the request again while the answer is 409 (in flight elsewhere),
// waiting Retry-After each time, up to the deadline.
async function payUntilSettled(svc, req, timeoutMs = 120000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await pay(svc, req);
    if (r.status !== 409 || Date.now() > deadline) return r;
    const wait = Number(r.headers.get('retry-after'));
    assert.ok(wait >= 1, `409 without a usable Retry-After: ${r.headers.get('retry-after')}`);
    await sleep(Math.min(wait, 5) * 1000);
  }
}

// A problem+json answer: the content type, a body that parses, its status.
function assertProblem(r, status) {
  if (status !== undefined) assert.equal(r.status, status, r.text);
  assert.match(r.headers.get('content-type') || '', /^application\/problem\+json/, r.text);
  const p = JSON.parse(r.text);
  assert.equal(p.status, r.status);
  assert.equal(typeof p.title, 'string');
  assert.doesNotMatch(r.text, /\n\s+at |\.js:\d+|\.go:\d+|\.java:\d+|Exception/, 'no stack trace');
}

// ---- the database, through psql ----------------------------------------

function psql(sql) {
  return new Promise((resolve, reject) => {
    execFile('psql', ['-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-U', ADMIN_USER, '-c', sql],
      { env: { ...process.env, PGAPPNAME: 'conformance' } },
      (err, stdout, stderr) => (err ? reject(new Error(`psql: ${stderr || err.message}`)) : resolve(stdout.trim())));
  });
}

const lit = (s) => `'${String(s).replace(/'/g, "''")}'`;

async function countPayments(scope, order) {
  return Number(await psql(`SELECT count(*) FROM payments WHERE scope = ${lit(scope)} AND order_id = ${lit(order)}`));
}

async function keyRow(scope, key) {
  const row = await psql(`SELECT status || '|' || coalesce(recovery_point, '') FROM idempotency_keys
                          WHERE scope = ${lit(scope)} AND key = ${lit(key)}`);
  if (row === '') return null;
  const [status, recoveryPoint] = row.split('|');
  return { status, recoveryPoint };
}

async function waitFor(what, check, timeoutMs = 120000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// Holds LOCK TABLE payments in an open transaction of its own psql, so that
// a service's INSERT INTO payments blocks: the service can then be killed
// at a known point, after its claim and before its transaction commits.
async function lockPayments() {
  const app = `conformance-lock-${RUN}`;
  const p = spawn('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-U', ADMIN_USER],
    { env: { ...process.env, PGAPPNAME: app }, stdio: ['pipe', 'ignore', 'inherit'] });
  const done = new Promise((resolve) => p.on('exit', resolve));
  p.stdin.write('BEGIN;\nLOCK TABLE payments IN SHARE ROW EXCLUSIVE MODE;\n');
  await waitFor('the lock on payments', async () =>
    Number(await psql(`SELECT count(*) FROM pg_stat_activity WHERE application_name = ${lit(app)}
                       AND state = 'idle in transaction'`)) === 1, 60000);
  return {
    release: async () => { p.stdin.end('ROLLBACK;\n'); await done; },
  };
}

// Waits until some session's INSERT INTO payments, in this database, waits
// for a lock (pg_stat_activity lists every database's sessions: another
// service's suite may run at once on the same server).
function waitForBlockedInsert() {
  return waitFor('an INSERT INTO payments waiting for the lock', async () =>
    Number(await psql(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                       AND wait_event_type = 'Lock' AND query ILIKE '%INSERT INTO payments%'`)) > 0);
}

// ---- the fake card network -----------------------------------------------

// POST /authorizations {merchant, idempotency_key, amount} authorizes (and is
// counted) on arrival, then answers 201 {authorization_id} -- at once, or
// when released if held.  GET /authorizations?merchant=&idempotency_key=
// answers the authorization made for that reference (200) or 404, and is
// counted as a lookup.
async function startCardNetwork() {
  const auths = new Map(); // reference -> [authorization ids]
  const lookups = new Map(); // reference -> count
  // connections accepted, requests begun (headers read) and read whole:
  // for the tests' messages when a request never arrives
  const net = { holdAll: false, held: new Set(), waiting: [], seq: 0, conns: 0, begun: 0, read: 0 };
  const ref = (merchant, key) => JSON.stringify([merchant, key]);

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    net.begun += 1;
    req.on('end', () => { net.read += 1; });
    const answer = (status, obj) => {
      try {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(obj ? JSON.stringify(obj) : '');
      } catch { /* the caller is gone */ }
    };
    if (req.method === 'GET' && url.pathname === '/authorizations') {
      const r = ref(url.searchParams.get('merchant') ?? '', url.searchParams.get('idempotency_key'));
      lookups.set(r, (lookups.get(r) || 0) + 1);
      const ids = auths.get(r);
      return ids ? answer(200, { authorization_id: ids[0] }) : answer(404);
    }
    if (req.method !== 'POST' || url.pathname !== '/authorizations') return answer(404);
    let text = '';
    req.on('data', (d) => { text += d; });
    req.on('end', () => {
      let body;
      try {
        body = JSON.parse(text);
      } catch {
        return answer(400);
      }
      if (typeof body.idempotency_key !== 'string' || !Number.isInteger(body.amount)) return answer(400);
      const r = ref(body.merchant ?? '', body.idempotency_key);
      const id = `auth_${++net.seq}`;
      auths.set(r, [...(auths.get(r) || []), id]);
      const respond = () => answer(201, { authorization_id: id });
      if (net.holdAll || net.held.has(r)) net.waiting.push({ r, respond });
      else respond();
    });
  });
  server.keepAliveTimeout = 60000;
  server.on('connection', () => { net.conns += 1; });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    authorizations: (merchant, key) => (auths.get(ref(merchant, key)) || []).slice(),
    counts: () => `${net.conns} connections, ${net.begun} requests begun, ${net.read} read whole`,
    lookups: (merchant, key) => lookups.get(ref(merchant, key)) || 0,
    // hold(): every answer from now on; hold(m, k): that reference's
    hold(merchant, key) {
      if (key === undefined) net.holdAll = true;
      else net.held.add(ref(merchant, key));
    },
    release() {
      net.holdAll = false;
      net.held.clear();
      const w = net.waiting;
      net.waiting = [];
      w.forEach((x) => x.respond());
    },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

module.exports = {
  RUN, uid, sleep, startService, kill, stopAll, pay, payUntilSettled, assertProblem,
  psql, lit, countPayments, keyRow, waitFor, lockPayments, waitForBlockedInsert, startCardNetwork,
};
