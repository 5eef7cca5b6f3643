'use strict';
// The Express middleware against a real server: the checks before any
// claim, new and replay (the same bytes), mismatch, scope, failures rolled
// back or recorded retryable, committed claims with recovery points, 409
// for a request in flight, and the onOutcome hook.

const test = require('node:test');
const assert = require('node:assert/strict');
const { idempotency } = require('..');
const { newPool, newKey, serve, post, keyRow, paymentsFor, deferred, commitCutter } = require('./helpers');

const pool = newPool(6);
const heartbeatPool = newPool(1);
test.after(() => Promise.all([pool.end(), heartbeatPool.end()]));

const INSERT = `INSERT INTO payments (scope, order_id, amount) VALUES ($1, $2, $3)
                RETURNING jsonb_build_object('payment_id', id, 'order', order_id, 'amount', amount)::text AS response`;

// A payment handler: the payment in the claim's transaction, then respond.
// Every connection of the pool (six) is outside any transaction: a claim's
// connection was given back, none left in its transaction.
async function assertPoolIdle() {
  const all = await Promise.all(Array.from({ length: 6 }, () => pool.connect()));
  const idle = await Promise.all(all.map((c) => c.query('SELECT now() = statement_timestamp() AS idle')));
  all.forEach((c) => c.release());
  assert.deepEqual(idle.map((t) => t.rows[0].idle), Array(6).fill(true));
}

async function pay(req) {
  const idem = req.idempotency;
  try {
    const db = await idem.tx();
    const r = await db.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
    await idem.respond(201, r.rows[0].response);
  } catch (err) {
    await idem.error(err);
  }
}

// The app with the middleware, and the outcomes it reported.
async function app(options, handler = pay) {
  const events = [];
  const svc = await serve(idempotency({ pool, heartbeatPool, onOutcome: (e) => events.push(e), ...options }),
    handler);
  test.after(() => svc.close());
  return { base: svc.base, events };
}

const problemOf = (r, status) => {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers.get('content-type'), /^application\/problem\+json/);
  assert.equal(r.json.status, status);
  assert.equal(typeof r.json.title, 'string');
};

test('refused before any claim: no key 400, 415, 413, malformed JSON 400, validate 422; nothing claimed', async () => {
  const validate = (body) => (Number.isInteger(body.amount) ? null : '"amount" must be an integer.');
  const { base, events } = await app({ validate, maxBody: 1024, scope: () => 'mw-refused' });
  const key = newKey();
  problemOf(await post(base, { body: { order: 'x', amount: 1 } }), 400);
  problemOf(await post(base, { key, body: 'order=x', contentType: 'text/plain' }), 415);
  problemOf(await post(base, { key, body: { order: 'x'.repeat(2000), amount: 1 } }), 413);
  problemOf(await post(base, { key, body: '{"order": ' }), 400);
  const invalid = await post(base, { key, body: { order: 'x', amount: 'lots' } });
  problemOf(invalid, 422);
  assert.equal(invalid.json.detail, '"amount" must be an integer.');
  assert.deepEqual(events.map((e) => [e.outcome, e.status]),
    [['rejected', 400], ['rejected', 415], ['rejected', 413], ['rejected', 400], ['rejected', 422]]);
  assert.equal(events[0].claimElapsed, null);
  assert.equal(await keyRow(pool, key, 'mw-refused'), null);
});

test('new then replay: the same bytes, Idempotent-Replayed; another body 422; outcomes with timings', async () => {
  const { base, events } = await app({ scope: (req) => req.get('X-Test-Tenant') });
  const key = newKey();
  const order = `o-${key}`;
  const headers = { 'X-Test-Tenant': 'mw-replay' };
  const first = await post(base, { key, headers, body: { order, amount: 3000 } });
  assert.equal(first.status, 201, first.text);
  assert.equal(first.headers.get('idempotent-replayed'), null);
  assert.match(first.headers.get('content-type'), /^application\/json/);
  const again = await post(base, { key, headers, body: `{"amount": 3000, "order": "${order}"}` });
  assert.equal(again.status, 201);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(again.text, first.text);
  problemOf(await post(base, { key, headers, body: { order, amount: 3001 } }), 422);
  assert.equal(await paymentsFor(pool, 'mw-replay', order), 1);
  assert.deepEqual(events.map((e) => [e.outcome, e.status, e.key, e.scope, e.committed]), [
    ['new', 201, key, 'mw-replay', false], ['replay', 201, key, 'mw-replay', false],
    ['mismatch', 422, key, 'mw-replay', false]]);
  assert.equal(events[2].sqlstate, 'IK001');
  for (const e of events) {
    assert.equal(typeof e.elapsed, 'number');
    assert.ok(e.elapsed >= e.claimElapsed && e.claimElapsed >= 0, JSON.stringify(e));
  }
});

test('the scope comes from the authenticated caller, not from a Merchant-Id header unless told', async () => {
  const key = newKey();
  const order = `o-${key}`;
  // default: req.idempotencyScope (an authentication middleware's), the header ignored
  const auth = (req, res, next) => { req.idempotencyScope = 'mw-auth'; next(); };
  const events = [];
  const mw = idempotency({ pool, onOutcome: (e) => events.push(e) });
  const svc = await serve((req, res, next) => auth(req, res, () => mw(req, res, next)), pay);
  test.after(() => svc.close());
  const a = await post(svc.base, { key, headers: { 'Merchant-Id': 'm1' }, body: { order, amount: 5 } });
  const b = await post(svc.base, { key, headers: { 'Merchant-Id': 'm2' }, body: { order, amount: 5 } });
  assert.equal(a.status, 201, a.text);
  assert.equal(b.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(events.map((e) => e.scope), ['mw-auth', 'mw-auth']);
  // scopeFromHeader: each header value its own scope
  const { base } = await app({ scopeFromHeader: 'Merchant-Id' });
  const c = await post(base, { key, headers: { 'Merchant-Id': 'mw-h1' }, body: { order, amount: 5 } });
  const d = await post(base, { key, headers: { 'Merchant-Id': 'mw-h2' }, body: { order, amount: 5 } });
  assert.equal(c.status, 201);
  assert.equal(d.status, 201);
  assert.equal(d.headers.get('idempotent-replayed'), null);
  assert.notEqual(c.text, d.text);
  problemOf(await post(base, { key, headers: { 'Merchant-Id': 'x'.repeat(300) }, body: { order, amount: 5 } }), 400);
  // a scope function that refuses
  const refused = await app({ scope: () => { throw { status: 401, title: 'Unauthorized', detail: 'Log in.' }; } });
  problemOf(await post(refused.base, { key, body: { order, amount: 5 } }), 401);
  assert.deepEqual(refused.events.map((e) => e.outcome), ['rejected']);
});

test('a failed attempt in a transaction is rolled back: the key is free, the retry is new', async () => {
  let failNext = true;
  const { base, events } = await app({ scope: () => 'mw-fail' }, async (req) => {
    const idem = req.idempotency;
    const db = await idem.tx();
    await db.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
    if (failNext) {
      failNext = false;
      return idem.fail({ status: 502, title: 'Upstream failed', detail: 'Retry.', headers: { 'Retry-After': '1' } });
    }
    const r = await db.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
    return idem.respond(201, r.rows[0].response);
  });
  const key = newKey();
  const order = `o-${key}`;
  const first = await post(base, { key, body: { order, amount: 7 } });
  problemOf(first, 502);
  assert.equal(first.headers.get('retry-after'), '1');
  assert.equal(await keyRow(pool, key, 'mw-fail'), null);
  assert.equal(await paymentsFor(pool, 'mw-fail', order), 0);
  const retry = await post(base, { key, body: { order, amount: 7 } });
  assert.equal(retry.status, 201, retry.text);
  assert.equal(await paymentsFor(pool, 'mw-fail', order), 2);
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['new', 502], ['new', 201]]);
});

test('a database error of the handler: its status (400 for a class 22), rolled back, reported error', async () => {
  const { base, events } = await app({ scope: () => 'mw-error' }, async (req) => {
    const idem = req.idempotency;
    try {
      await (await idem.tx()).query("SELECT 'not a number'::int");
    } catch (err) {
      await idem.error(err);
    }
  });
  const key = newKey();
  problemOf(await post(base, { key, body: { order: 'x', amount: 1 } }), 400);
  assert.equal(await keyRow(pool, key, 'mw-error'), null);
  assert.deepEqual(events.map((e) => [e.outcome, e.status, e.sqlstate]), [['error', 400, '22P02']]);
});

test('a handler that answers on its own (an error handler) leaves no claim behind', async () => {
  // next(err), as Express 5 does with a rejected promise (Express 4 does not)
  const { base, events } = await app({ scope: () => 'mw-abandon' }, (req, res, next) => {
    req.idempotency.tx()
      .then((db) => db.query(INSERT, ['mw-abandon', 'thrown', 1]))
      .then(() => { throw new Error('boom'); })
      .catch(next);
  });
  const key = newKey();
  const r = await post(base, { key, body: { order: 'thrown', amount: 1 } });
  assert.equal(r.status, 500);
  assert.equal(r.text, 'handler failed');
  // settled on the response's close: wait for the report
  for (let i = 0; i < 200 && events.length === 0; i++) await new Promise((s) => setTimeout(s, 25));
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['new', 500]]);
  assert.equal(await keyRow(pool, key, 'mw-abandon'), null);
});

test('committed claim: 409 + Retry-After while in flight, recorded failed, reclaimed at the recovery point', async () => {
  const held = deferred();
  const arrived = deferred();
  let attempt = 0;
  const seen = [];
  const { base, events } = await app({
    scope: () => 'mw-card', committed: () => true, lease: 30, heartbeatEvery: 0.05, awaitResult: 0,
  }, async (req) => {
    const idem = req.idempotency;
    attempt += 1;
    seen.push([idem.outcome, idem.recoveryPoint, idem.committed]);
    try {
      if (attempt === 1) {
        await idem.checkpoint('step-1');
        arrived.resolve();
        await held.promise;
        return idem.fail({ status: 502, title: 'Remote failed', detail: 'Retry.', headers: { 'Retry-After': '1' } });
      }
      const r = await (await idem.tx()).query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
      return idem.respond(201, r.rows[0].response);
    } catch (err) {
      return idem.error(err);
    }
  });
  const key = newKey();
  const order = `o-${key}`;
  const first = post(base, { key, body: { order, amount: 9 } });
  await arrived.promise;
  const busy = await post(base, { key, body: { order, amount: 9 } });
  problemOf(busy, 409);
  assert.ok(Number(busy.headers.get('retry-after')) >= 1);
  // heartbeats (every 50 ms here) renew the lease meanwhile: its end moves on
  const until = async () =>
    (await pool.query('SELECT locked_until FROM idempotency_keys WHERE key = $1', [key])).rows[0].locked_until;
  const before = await until();
  let renewed = false;
  for (let i = 0; i < 400 && !renewed; i++) {
    await new Promise((s) => setTimeout(s, 25));
    renewed = (await until()) > before;
  }
  assert.ok(renewed, 'the lease was never renewed');
  held.resolve();
  problemOf(await first, 502);
  assert.equal((await keyRow(pool, key, 'mw-card')).status, 'failed');
  const retry = await post(base, { key, body: { order, amount: 9 } });
  assert.equal(retry.status, 201, retry.text);
  const replay = await post(base, { key, body: { order, amount: 9 } });
  assert.equal(replay.text, retry.text);
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(seen, [['new', null, true], ['reclaimed', 'step-1', true]]);
  assert.deepEqual(events.map((e) => [e.outcome, e.status, e.committed]), [
    ['in_progress', 409, true], ['new', 502, true], ['reclaimed', 201, true], ['replay', 201, true]]);
  assert.equal(await paymentsFor(pool, 'mw-card', order), 1);
});

test('committed claim: a heartbeat waiting for its connection is not queued again at the next tick', async () => {
  const held = deferred();
  const arrived = deferred();
  const { base } = await app({
    scope: () => 'mw-beat-queue', committed: () => true, lease: 30, heartbeatEvery: 0.02, awaitResult: 0,
  }, async (req) => {
    arrived.resolve();
    await held.promise;
    return pay(req);
  });
  // the heartbeat pool's one connection is taken: every heartbeat waits
  const taken = await heartbeatPool.connect();
  let first;
  try {
    const key = newKey();
    first = post(base, { key, body: { order: `o-${key}`, amount: 12 } });
    await arrived.promise;
    await new Promise((s) => setTimeout(s, 2000)); // 100 ticks
    assert.ok(heartbeatPool.waitingCount <= 1, `${heartbeatPool.waitingCount} heartbeats queued for the pool`);
  } finally {
    taken.release();
    held.resolve();
  }
  assert.equal((await first).status, 201);
});

test('committed claim: a duplicate waits for the result (awaitResult) and gets the first answer', async () => {
  const held = deferred();
  const arrived = deferred();
  const { base, events } = await app({ scope: () => 'mw-await', committed: () => true, awaitResult: 30 },
    async (req) => {
      arrived.resolve();
      await held.promise;
      return pay(req);
    });
  const key = newKey();
  const body = { order: `o-${key}`, amount: 11 };
  const first = post(base, { key, body });
  await arrived.promise;
  const second = post(base, { key, body });
  // the duplicate is waiting inside idem_claim before the first goes on
  let waiting = false;
  for (let i = 0; i < 400 && !waiting; i++) {
    const r = await pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%idem_claim%' AND state = 'active' AND wait_event IS NOT NULL AND pid <> pg_backend_pid()");
    waiting = r.rows[0].n > 0;
    if (!waiting) await new Promise((s) => setTimeout(s, 25));
  }
  assert.ok(waiting, 'the duplicate never waited in idem_claim');
  held.resolve();
  const [a, b] = await Promise.all([first, second]);
  assert.equal(a.status, 201, a.text);
  assert.equal(b.status, 201, b.text);
  assert.equal(b.text, a.text);
  assert.equal(b.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(events.map((e) => e.outcome).sort(), ['new', 'replay']);
});

test('respond without a body (null): the answer and its replay have none', async () => {
  const { base } = await app({ scope: () => 'mw-empty' }, (req) => req.idempotency.respond(204, null));
  const key = newKey();
  const first = await post(base, { key, body: { order: 'x', amount: 1 } });
  assert.equal(first.status, 204);
  assert.equal(first.text, '');
  const again = await post(base, { key, body: { order: 'x', amount: 1 } });
  assert.equal(again.status, 204);
  assert.equal(again.text, '');
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  const row = await keyRow(pool, key, 'mw-empty');
  assert.equal(row.status, 'completed');
  assert.equal(row.response_code, 204);
});

test('the connection tx() gave is refused once the claim is answered (55000): it went back to the pool', async () => {
  const kept = deferred();
  const { base } = await app({ scope: () => 'mw-kept' }, async (req) => {
    const idem = req.idempotency;
    const db = await idem.tx();
    const r = await db.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
    await idem.respond(201, r.rows[0].response);
    kept.resolve(db);
  });
  const key = newKey();
  const r = await post(base, { key, body: { order: key, amount: 7 } });
  assert.equal(r.status, 201, r.text);
  const db = await kept.promise;
  // another request's transaction on the pool's connections meanwhile
  const other = await pool.connect();
  await other.query('BEGIN');
  await assert.rejects(db.query(INSERT, ['mw-kept', key, 7]), (err) => err.code === '55000');
  const viaCallback = await new Promise((resolve) => db.query('SELECT 1', (err) => resolve(err)));
  assert.equal(viaCallback.code, '55000');
  await assert.rejects(db.end(), (err) => err.code === '55000');
  db.release(); // the claim's to do: a no-op, not a second release of the pool's connection
  await other.query('ROLLBACK');
  other.release();
  assert.equal(await paymentsFor(pool, 'mw-kept', key), 1);
  assert.equal((await keyRow(pool, key, 'mw-kept')).status, 'completed');
  await assertPoolIdle();
});

test('a handler that never answers: undone after timeout, 503 + Retry-After, the key free, its connection refused', { timeout: 30000 }, async () => {
  const kept = deferred();
  let attempt = 0;
  const { base, events } = await app({ scope: () => 'mw-timeout', timeout: 0.3 }, async (req) => {
    attempt += 1;
    if (attempt > 1) return pay(req);
    const idem = req.idempotency;
    const db = await idem.tx();
    await db.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
    kept.resolve(db);
    // returns without answering (as an Express 4 async handler that rejected)
  });
  const key = newKey();
  const body = { order: `o-${key}`, amount: 13 };
  const first = await post(base, { key, body });
  problemOf(first, 503);
  assert.equal(first.headers.get('retry-after'), '1');
  const db = await kept.promise;
  await assert.rejects(db.query('SELECT 1'), (err) => err.code === '55000');
  assert.equal(await keyRow(pool, key, 'mw-timeout'), null);
  assert.equal(await paymentsFor(pool, 'mw-timeout', body.order), 0);
  const retry = await post(base, { key, body });
  assert.equal(retry.status, 201, retry.text);
  assert.equal(await paymentsFor(pool, 'mw-timeout', body.order), 1);
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['timeout', 503], ['new', 201]]);
  await assertPoolIdle();
});

test('a committed claim whose handler is late: 503 at the timeout, the claim still held (a retry gets 409, no second charge), its late answer completes the key', { timeout: 30000 }, async () => {
  const late = deferred();
  let attempt = 0;
  let charges = 0;
  const { base, events } = await app({
    // timeout 3: the 503 at 3 s; the claim is given up at 6 s, so what
    // follows the 503 (a renewal seen, a retry's 409, the late answer) has
    // 3 s, on a loaded machine too
    scope: () => 'mw-hang', committed: () => true, heartbeatEvery: 0.05, timeout: 3, awaitResult: 0,
  }, async (req) => {
    attempt += 1;
    const idem = req.idempotency;
    await idem.checkpoint('remote-called');
    charges += 1;
    await late.promise; // a slow remote call: it goes through after the timeout
    return idem.respond(201, { charged: idem.body.amount });
  });
  const key = newKey();
  const body = { order: `o-${key}`, amount: 17 };
  const first = await post(base, { key, body });
  problemOf(first, 503);
  assert.equal(first.headers.get('retry-after'), '1');
  // not recorded failed: the claim is held, its heartbeats go on
  assert.equal((await keyRow(pool, key, 'mw-hang')).status, 'processing');
  const until = async () =>
    (await pool.query('SELECT locked_until FROM idempotency_keys WHERE key = $1', [key])).rows[0].locked_until;
  const before = await until();
  let renewed = false;
  for (let i = 0; i < 80 && !renewed; i++) {
    await new Promise((s) => setTimeout(s, 25));
    renewed = (await until()) > before;
  }
  assert.ok(renewed, 'no heartbeat renewed the lease after the timeout');
  // the retry the 503 asked for does not take the key over
  problemOf(await post(base, { key, body }), 409);
  assert.equal(attempt, 1);
  late.resolve();
  for (let i = 0; i < 200 && (await keyRow(pool, key, 'mw-hang')).status !== 'completed'; i++)
    await new Promise((s) => setTimeout(s, 25));
  const row = await keyRow(pool, key, 'mw-hang');
  assert.deepEqual([row.status, row.response_code], ['completed', 201]);
  const replay = await post(base, { key, body });
  assert.equal(replay.status, 201, replay.text);
  assert.deepEqual(replay.json, { charged: 17 });
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual([attempt, charges], [1, 1]);
  // once per request: the late answer is not reported again
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['timeout', 503], ['in_progress', 409], ['replay', 201]]);
});

test('a committed claim whose handler never settles it: held one more timeout, then its heartbeats stop (no idem_fail), the lease lapses, a retry reclaims it', { timeout: 30000 }, async () => {
  const hang = deferred();
  const kept = deferred();
  let attempt = 0;
  const seen = [];
  const gaveUp = deferred();
  const log = { error: (msg) => { if (/its heartbeats stop/.test(msg)) gaveUp.resolve(); } };
  // timeout 2: the 503 at 2 s, the claim given up at 4 s; its handler's
  // checkpoint and transaction come before, on a loaded machine too
  const { base, events } = await app({
    scope: () => 'mw-lapse', committed: () => true, lease: 1, heartbeatEvery: 0.05, timeout: 2, awaitResult: 0, log,
  }, async (req) => {
    attempt += 1;
    const idem = req.idempotency;
    seen.push([idem.outcome, idem.recoveryPoint]);
    if (attempt > 1) return pay(req);
    await idem.checkpoint('remote-called');
    kept.resolve(await idem.tx());
    await hang.promise; // a remote call that never returns
  });
  test.after(() => hang.resolve());
  const key = newKey();
  const body = { order: `o-${key}`, amount: 29 };
  problemOf(await post(base, { key, body }), 503);
  const db = await kept.promise;
  const until = async () =>
    (await pool.query('SELECT locked_until FROM idempotency_keys WHERE key = $1', [key])).rows[0].locked_until;
  // given up a second timeout after the first; then no heartbeat renews
  // the lease (one in flight may land first: two reads 300 ms apart agree)
  await gaveUp.promise;
  let last = await until();
  let stopped = false;
  for (let i = 0; i < 50 && !stopped; i++) {
    await new Promise((s) => setTimeout(s, 300));
    const now = await until();
    stopped = now.getTime() === last.getTime();
    last = now;
  }
  assert.ok(stopped, 'the heartbeats never stopped');
  // never recorded failed: the lease lapses instead
  assert.equal((await keyRow(pool, key, 'mw-lapse')).status, 'processing');
  // the claim's transaction was rolled back and its connection given back
  await assert.rejects(db.query('SELECT 1'), (err) => err.code === '55000');
  while ((await pool.query('SELECT locked_until < now() AS lapsed FROM idempotency_keys WHERE key = $1', [key])).rows[0].lapsed !== true)
    await new Promise((s) => setTimeout(s, 100));
  const retry = await post(base, { key, body });
  assert.equal(retry.status, 201, retry.text);
  assert.deepEqual(seen, [['new', null], ['reclaimed', 'remote-called']]);
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['timeout', 503], ['reclaimed', 201]]);
  await assertPoolIdle();
});

test('timers beyond what Node can hold are refused, not fired at once; heartbeats not below the lease refused', () => {
  assert.throws(() => idempotency({ pool, timeout: 3e6 }), /timeout must be a number >= 0 and <= 2147483/);
  assert.throws(() => idempotency({ pool, heartbeatEvery: 3e6 }), /heartbeatEvery/);
  assert.throws(() => idempotency({ pool, lease: 5, heartbeatEvery: 5 }), /heartbeatEvery must be below lease/);
  assert.throws(() => idempotency({ pool, heartbeatEvery: 40 }), /heartbeatEvery must be below lease/);
  assert.doesNotThrow(() => idempotency({ pool, lease: 1e7 })); // heartbeats then every 2147483 s
});

test('a committed claim whose tx() waits for a dry pool past the timeout: 503, then the transaction it gets completes the key, the connection goes back', { timeout: 30000 }, async () => {
  const small = newPool(1);
  test.after(() => small.end());
  const got = deferred();
  // timeout 2: the 503 at 2 s, the connection free at 2.2 s, the claim given
  // up at 4 s: the transaction has 1.8 s to complete the key
  const { base, events } = await app({ pool: small, scope: () => 'mw-dry', committed: () => true, timeout: 2 },
    async (req) => {
      const idem = req.idempotency;
      const mine = await small.connect(); // the pool's one connection: tx() waits
      setTimeout(() => mine.release(), 2200);
      try {
        const db = await idem.tx();
        got.resolve('a transaction');
        const r = await db.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
        await idem.respond(201, r.rows[0].response);
      } catch (err) {
        got.resolve(err.code);
        await idem.error(err);
      }
    });
  const key = newKey();
  problemOf(await post(base, { key, body: { order: key, amount: 19 } }), 503);
  assert.equal(await got.promise, 'a transaction');
  for (let i = 0; i < 200 && (await keyRow(pool, key, 'mw-dry')).status !== 'completed'; i++)
    await new Promise((s) => setTimeout(s, 25));
  assert.equal((await keyRow(pool, key, 'mw-dry')).status, 'completed');
  assert.equal(await paymentsFor(pool, 'mw-dry', key), 1);
  for (let i = 0; i < 200 && small.idleCount !== small.totalCount; i++) await new Promise((s) => setTimeout(s, 25));
  assert.deepEqual([small.totalCount, small.idleCount, small.waitingCount], [1, 1, 0]);
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['timeout', 503]]);
});

test('a committed claim\'s tx() called twice at once: one transaction, both calls get it, no connection left out', { timeout: 30000 }, async () => {
  const small = newPool(2);
  test.after(() => small.end());
  const { base } = await app({ pool: small, scope: () => 'mw-twice', committed: () => true }, async (req) => {
    const idem = req.idempotency;
    try {
      const [a, b] = await Promise.all([idem.tx(), idem.tx()]);
      const r = await a.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
      assert.equal(a, b);
      await idem.respond(201, r.rows[0].response);
    } catch (err) {
      await idem.error(err);
    }
  });
  const key = newKey();
  const r = await post(base, { key, body: { order: key, amount: 23 } });
  assert.equal(r.status, 201, r.text);
  for (let i = 0; i < 200 && small.idleCount !== small.totalCount; i++) await new Promise((s) => setTimeout(s, 25));
  assert.equal(small.idleCount, small.totalCount, 'a connection was left checked out');
  assert.equal(await paymentsFor(pool, 'mw-twice', key), 1);
});

test('a replay of a key failed without a status (attempts_exhausted, idem_fail with a NULL code): 500, not 200; completed by SQL without one: 200', async () => {
  const { base, events } = await app({ scope: () => 'mw-nullcode' });
  const body = { order: 'nc', amount: 3 };
  const failed = newKey();
  const c = (await pool.query("SELECT token FROM idem_claim($1, $2::jsonb, 'mw-nullcode', lease => '30 s')",
    [failed, JSON.stringify(body)])).rows[0];
  await pool.query("SELECT idem_fail($1, 'mw-nullcode', $2, NULL, NULL, false)", [failed, c.token]);
  const r = await post(base, { key: failed, body });
  assert.equal(r.status, 500, r.text);
  assert.equal(r.headers.get('idempotent-replayed'), 'true');
  const done = newKey();
  await pool.query("SELECT idem_claim($1, $2::jsonb, 'mw-nullcode'), idem_complete($1, NULL, NULL, 'mw-nullcode')",
    [done, JSON.stringify(body)]);
  const ok = await post(base, { key: done, body });
  assert.equal(ok.status, 200, ok.text);
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['replay', 500], ['replay', 200]]);
});

test('respond() with a body JSON.stringify cannot write (a BigInt): 500, the claim undone, no connection left in a transaction', { timeout: 30000 }, async () => {
  const { base, events } = await app({ scope: () => 'mw-bigint' }, async (req) => {
    const idem = req.idempotency;
    try {
      const db = await idem.tx();
      await db.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
      await idem.respond(201, { amount: 1n });
    } catch (err) {
      await idem.error(err);
    }
  });
  const key = newKey();
  const r = await post(base, { key, body: { order: key, amount: 5 }, signal: AbortSignal.timeout(5000) });
  problemOf(r, 500);
  assert.equal(await keyRow(pool, key, 'mw-bigint'), null);
  assert.equal(await paymentsFor(pool, 'mw-bigint', key), 0);
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['error', 500]]);
  await assertPoolIdle();
});

test('an answer idem_complete refuses (\\u0000: 22P05) is the server\'s fault: 500, not 400, the claim undone', async () => {
  const { base, events } = await app({ scope: () => 'mw-nul' }, async (req) => {
    const idem = req.idempotency;
    const db = await idem.tx();
    await db.query(INSERT, [idem.scope, idem.body.order, idem.body.amount]);
    await idem.respond(201, { note: 'a\u0000b' });
  });
  const key = newKey();
  problemOf(await post(base, { key, body: { order: key, amount: 6 } }), 500);
  assert.equal(await keyRow(pool, key, 'mw-nul'), null);
  assert.equal(await paymentsFor(pool, 'mw-nul', key), 0);
  assert.deepEqual(events.map((e) => [e.outcome, e.status, e.sqlstate]), [['error', 500, '22P05']]);
  await assertPoolIdle();
});

test('the claim\'s connection ended while the handler holds it (pg_terminate_backend): 500, the process goes on, nothing claimed', { timeout: 30000 }, async () => {
  // an 'error' event nobody listens to is thrown out of the socket's
  // handler: the process's end, which node --test only reports
  const uncaught = [];
  const onUncaught = (err) => uncaught.push(String(err));
  process.on('uncaughtException', onUncaught);
  test.after(() => process.removeListener('uncaughtException', onUncaught));
  const { base, events } = await app({ scope: () => 'mw-terminated' }, async (req) => {
    const idem = req.idempotency;
    try {
      const db = await idem.tx();
      const pid = (await db.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      await pool.query('SELECT pg_terminate_backend($1, 5000)', [pid]); // returns once it has ended
      // the server's FATAL reaches the connection while nobody queries it:
      // pg emits 'error' on it, which ended the process
      await new Promise((s) => setTimeout(s, 500));
      await db.query('SELECT 1');
      await idem.respond(201, '{}');
    } catch (err) {
      await idem.error(err);
    }
  });
  const key = newKey();
  problemOf(await post(base, { key, body: { order: key, amount: 7 } }), 500);
  assert.equal(await keyRow(pool, key, 'mw-terminated'), null);
  assert.deepEqual(events.map((e) => e.outcome), ['error']);
  assert.deepEqual(uncaught, []);
  await assertPoolIdle();
});

test('a COMMIT whose outcome is unknown (the link cut after the server committed): 503 retry with the same key, not "not processed"; the retry replays', { timeout: 30000 }, async () => {
  const proxy = await commitCutter();
  const cutPool = newPool(2, { host: '127.0.0.1', port: proxy.port });
  test.after(async () => { await cutPool.end(); await proxy.close(); });
  const events = [];
  const svc = await serve(idempotency({ pool: cutPool, heartbeatPool, onOutcome: (e) => events.push(e) }), pay);
  test.after(() => svc.close());
  const key = newKey();
  const body = { order: `o-${key}`, amount: 12 };
  proxy.arm();
  const first = await post(svc.base, { key, body });
  problemOf(first, 503);
  assert.equal(first.json.title, 'Outcome unknown');
  assert.match(first.json.detail, /same Idempotency-Key/);
  assert.equal(first.headers.get('retry-after'), '1');
  assert.equal(proxy.cuts, 1);
  assert.equal((await keyRow(pool, key, '')).status, 'completed');
  const retry = await post(svc.base, { key, body });
  assert.equal(retry.status, 201, retry.text);
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  assert.equal(await paymentsFor(pool, '', body.order), 1);
  assert.deepEqual(events.map((e) => [e.outcome, e.status]), [['error', 503], ['replay', 201]]);
});

test('a committed claim\'s answer idem_complete refuses (\\u0000): 500, recorded failed not retryable, the retry replays it and does not run the handler again', async () => {
  let runs = 0;
  const { base, events } = await app({ scope: () => 'mw-nul-committed', committed: () => true }, async (req) => {
    runs++; // the card network charged
    await req.idempotency.respond(201, { note: 'a\u0000b' });
  });
  const key = newKey();
  const first = await post(base, { key, body: { order: key, amount: 8 } });
  problemOf(first, 500);
  assert.match(first.json.detail, /processed but its answer could not be stored/);
  const row = await keyRow(pool, key, 'mw-nul-committed');
  assert.equal(row.status, 'failed');
  assert.equal(row.response_code, 500);
  const retry = await post(base, { key, body: { order: key, amount: 8 } });
  assert.equal(retry.status, 500, retry.text);
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(retry.json, { error: 'answer_not_storable' });
  assert.equal(runs, 1);
  assert.deepEqual(events.map((e) => [e.outcome, e.status, e.sqlstate]), [['error', 500, '22P05'], ['replay', 500, null]]);
  await assertPoolIdle();
});

test('a committed claim\'s heartbeats go on while respond() waits for a connection past the lease: another instance\'s retry gets 409, not the key', { timeout: 30000 }, async () => {
  const busyPool = newPool(1);
  const ownBeats = newPool(1);
  test.after(() => Promise.all([busyPool.end(), ownBeats.end()]));
  let runs = 0;
  const arrived = deferred();
  const go = deferred();
  const responding = deferred();
  const handler = async (req) => {
    runs++; // the card network charged
    arrived.resolve();
    await go.promise;
    responding.resolve();
    await req.idempotency.respond(201, { charge: runs });
  };
  const options = { scope: () => 'mw-busy-respond', committed: () => true, lease: 3, heartbeatEvery: 0.25, awaitResult: 0 };
  const a = await serve(idempotency({ pool: busyPool, heartbeatPool: ownBeats, ...options }), handler);
  test.after(() => a.close());
  const { base: b } = await app(options, handler);
  const key = newKey();
  const body = { order: key, amount: 9 };
  const first = post(a.base, { key, body });
  await arrived.promise;
  const held = await busyPool.connect(); // instance A's pool, busy
  go.resolve();
  await responding.promise;
  // past the lease while respond waits for A's pool
  await new Promise((s) => setTimeout(s, 4500));
  const during = await post(b, { key, body });
  held.release();
  const answer = await first;
  assert.equal(during.status, 409, during.text);
  assert.equal(answer.status, 201, answer.text);
  const retry = await post(b, { key, body });
  assert.equal(retry.status, 201, retry.text);
  assert.equal(retry.text, answer.text);
  assert.equal(runs, 1);
});

test('a committed claim given up (its handler past twice the timeout) whose handler then answers, having begun no transaction: the answer is recorded with its token, the retry replays it', { timeout: 30000 }, async () => {
  const late = deferred();
  const gaveUp = deferred();
  const recorded = deferred();
  const log = {
    error: (msg) => {
      if (/its heartbeats stop/.test(msg)) gaveUp.resolve();
      if (/late answer .* was (not )?recorded/.test(msg)) recorded.resolve(msg);
    },
  };
  let runs = 0;
  const { base } = await app({ scope: () => 'mw-late-lapsed', committed: () => true, timeout: 1, awaitResult: 0, log },
    async (req) => {
      runs++; // the card network charged
      await late.promise; // its answer comes after the claim was given up
      await req.idempotency.respond(201, { charge: runs });
    });
  const key = newKey();
  const body = { order: key, amount: 31 };
  problemOf(await post(base, { key, body }), 503);
  await gaveUp.promise;
  late.resolve();
  assert.match(await recorded.promise, /was recorded/);
  const retry = await post(base, { key, body });
  assert.equal(retry.status, 201, retry.text);
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(retry.json, { charge: 1 });
  assert.equal(runs, 1);
});
