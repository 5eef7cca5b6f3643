'use strict';
// End to end over HTTP: starts server.js against the database in the PG*
// environment, drives it with fetch, and checks the payments table.
const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { Pool } = require('pg');

const db = new Pool();
const servers = [];

function startServer(port, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(__dirname, '..', 'server.js')], {
      env: { ...process.env, PORT: String(port), ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    servers.push(child);
    child.stdout.on('data', (d) => { if (String(d).includes('listening')) resolve(child); });
    child.on('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
}

function pay(port, key, body, query = '') {
  const headers = { 'Content-Type': 'application/json', 'Merchant-Id': 'm42' };
  if (key) headers['Idempotency-Key'] = key;
  return fetch(`http://127.0.0.1:${port}/payments${query}`,
    { method: 'POST', headers, body: JSON.stringify(body) });
}

const count = async (order) =>
  Number((await db.query('SELECT count(*) FROM payments WHERE order_id = $1', [order])).rows[0].count);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const PORT = 3300 + (process.pid % 500);

before(async () => {
  await db.query(require('node:fs').readFileSync(path.join(__dirname, '..', 'schema.sql'), 'utf8'));
  await db.query("DELETE FROM idempotency_keys WHERE scope = 'm42'");
  await startServer(PORT);
});

after(async () => {
  for (const s of servers) s.kill('SIGKILL');
  await db.end();
});

test('a missing Idempotency-Key is 400 problem+json', async () => {
  const r = await pay(PORT, null, { order: 'A0', amount: 1 });
  assert.strictEqual(r.status, 400);
  assert.match(r.headers.get('content-type'), /application\/problem\+json/);
  assert.strictEqual((await r.json()).status, 400);
});

test('a double send makes one payment; the second is a replay', async () => {
  const first = await pay(PORT, 'k-double', { order: 'A1', amount: 3000 });
  assert.strictEqual(first.status, 201);
  assert.strictEqual(first.headers.get('idempotent-replayed'), null);
  const body1 = await first.json();
  const second = await pay(PORT, 'k-double', { amount: 3000, order: 'A1' });
  assert.strictEqual(second.status, 201);
  assert.strictEqual(second.headers.get('idempotent-replayed'), 'true');
  assert.deepStrictEqual(await second.json(), body1);
  assert.strictEqual(await count('A1'), 1);
});

test('20 concurrent duplicates make one payment and all get the same response', async () => {
  const rs = await Promise.all(Array.from({ length: 20 },
    () => pay(PORT, 'k-burst', { order: 'A2', amount: 500 })));
  const bodies = await Promise.all(rs.map((r) => r.json()));
  for (const r of rs) assert.strictEqual(r.status, 201);
  assert.strictEqual(rs.filter((r) => r.headers.get('idempotent-replayed') !== 'true').length, 1);
  for (const b of bodies) assert.deepStrictEqual(b, bodies[0]);
  assert.strictEqual(await count('A2'), 1);
});

test('the same key with a different body is 422 problem+json', async () => {
  const r = await pay(PORT, 'k-double', { order: 'A1', amount: 1 });
  assert.strictEqual(r.status, 422);
  assert.match(r.headers.get('content-type'), /application\/problem\+json/);
  assert.strictEqual(await count('A1'), 1);
});

test('card mode: a duplicate in flight gets 409 with Retry-After, then the replay', async () => {
  const first = pay(PORT, 'k-card', { order: 'A3', amount: 700 }, '?mode=card');
  await sleep(300);
  const dup = await pay(PORT, 'k-card', { order: 'A3', amount: 700 }, '?mode=card');
  assert.strictEqual(dup.status, 409);
  assert.ok(Number(dup.headers.get('retry-after')) >= 1);
  assert.strictEqual((await first).status, 201);
  const again = await pay(PORT, 'k-card', { order: 'A3', amount: 700 }, '?mode=card');
  assert.strictEqual(again.headers.get('idempotent-replayed'), 'true');
  assert.strictEqual(await count('A3'), 1);
});

test('the service crashes between claim and complete: 409 while the lease lives, then taken over, one payment', async () => {
  const port2 = PORT + 1;
  const crashing = await startServer(port2, { CARD_DELAY_MS: '5000', LEASE: '2 seconds' });
  pay(port2, 'k-crash', { order: 'A4', amount: 900 }, '?mode=card').catch(() => {});
  for (let i = 0; i < 100; i++) {    // wait until its claim is committed
    const r = await db.query("SELECT 1 FROM idempotency_keys WHERE scope = 'm42' AND key = 'k-crash'");
    if (r.rowCount) break;
    await sleep(50);
  }
  crashing.kill('SIGKILL');          // dies holding a committed claim, before paying
  const during = await pay(PORT, 'k-crash', { order: 'A4', amount: 900 }, '?mode=card');
  assert.strictEqual(during.status, 409);
  await sleep(2500);                 // the lease runs out: no heartbeat any more
  const after = await pay(PORT, 'k-crash', { order: 'A4', amount: 900 }, '?mode=card');
  assert.strictEqual(after.status, 201);
  assert.strictEqual(after.headers.get('idempotent-replayed'), null);
  const row = (await db.query("SELECT status, token FROM idempotency_keys WHERE scope = 'm42' AND key = 'k-crash'")).rows[0];
  assert.strictEqual(row.status, 'completed');
  assert.strictEqual(await count('A4'), 1);
});
