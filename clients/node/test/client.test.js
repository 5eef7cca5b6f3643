'use strict';
// The key functions against a real server, and the SQLSTATEs' meaning.

const test = require('node:test');
const assert = require('node:assert/strict');
const idem = require('..');
const { IdempotencyError } = idem;
const { newPool, newKey, keyRow } = require('./helpers');

const pool = newPool();
test.after(() => pool.end());

async function inTransaction(fn) {
  const db = await pool.connect();
  try {
    await db.query('BEGIN');
    const out = await fn(db);
    await db.query('COMMIT');
    return out;
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    db.release();
  }
}

test('SQLSTATEs: kind, HTTP status, Retry-After, and a problem without SQL', () => {
  const cases = [
    ['IK001', 'request_mismatch', 422], ['IK002', 'stale_token', 409], ['IK003', 'not_processing', 409],
    ['IK004', 'key_not_found', 404], ['IK005', 'token_required', 500], ['IK006', 'row_security_off', 503],
    ['22004', 'invalid_key', 400], ['22023', 'invalid_key', 400], ['22P02', 'invalid_request', 400],
    ['25006', 'read_only', 503], ['42501', 'database', 500], [undefined, 'database', 500],
  ];
  for (const [code, kind, status] of cases) {
    const e = IdempotencyError.from(Object.assign(new Error('SELECT secret FROM t failed'), { code }));
    assert.equal(e.kind, kind, code);
    assert.equal(e.status, status, code);
    assert.equal(e.retryAfter, status === 409 || status === 503 ? 1 : null, code);
    const p = e.problem();
    assert.equal(p.status, status);
    assert.equal(typeof p.title, 'string');
    if (status === 500 || kind === 'invalid_request') assert.doesNotMatch(p.detail, /SELECT|secret/, code);
  }
  const e = new IdempotencyError('x', { code: 'IK001' });
  assert.equal(IdempotencyError.from(e), e);
});

test('claim in a transaction: new, complete, then replay of the stored text; another body IK001', async () => {
  const key = newKey();
  const first = await inTransaction(async (db) => {
    const c = await idem.claim(db, key, { order: 'A1', amount: 3000 }, 'client-test');
    assert.equal(c.outcome, 'new');
    await idem.complete(db, key, 201, '{"payment_id": 1,   "order": "A1"}', 'client-test');
    return c;
  });
  assert.equal(first.response, null);
  const again = await inTransaction((db) => idem.claim(db, key, '{"amount":3000,"order":"A1"}', 'client-test'));
  assert.equal(again.outcome, 'replay');
  assert.equal(again.responseCode, 201);
  assert.equal(again.response, '{"order": "A1", "payment_id": 1}');
  await assert.rejects(inTransaction((db) => idem.claim(db, key, { order: 'A1', amount: 3001 }, 'client-test')),
    (err) => err instanceof IdempotencyError && err.code === 'IK001' && err.kind === 'request_mismatch' &&
      err.status === 422 && /./.test(err.detail || err.message));
  // another scope: its own key
  const other = await inTransaction((db) => idem.claim(db, key, { order: 'A1', amount: 1 }, 'client-test-2'));
  assert.equal(other.outcome, 'new');
});

test('a bad key is 400 (invalid_key)', async () => {
  for (const key of ['', 'a\u0001b', 'k'.repeat(300)])
    await assert.rejects(inTransaction((db) => idem.claim(db, key, null, 'client-test')),
      (err) => err instanceof IdempotencyError && err.kind === 'invalid_key' && err.status === 400,
      JSON.stringify(key.slice(0, 10)));
});

test('committed claim: token, heartbeat, checkpoint, fail; the retry reclaims with the recovery point', async () => {
  const key = newKey();
  const scope = 'client-test';
  const c = await idem.claim(pool, key, { n: 1 }, scope, { lease: 30 });
  assert.equal(c.outcome, 'new');
  assert.match(c.token, /^-?[0-9]+$/);
  const until = await idem.heartbeat(pool, key, scope, c.token, 60);
  assert.ok(until instanceof Date && until.getTime() > Date.now() + 30000, String(until));
  await idem.checkpoint(pool, key, 'step-1', scope, c.token);
  // a duplicate meanwhile: in_progress, with a Retry-After
  const dup = await idem.claim(pool, key, { n: 1 }, scope, { lease: 30, awaitResult: 0 });
  assert.equal(dup.outcome, 'in_progress');
  assert.ok(dup.retryAfter >= 1);
  await idem.fail(pool, key, scope, c.token);
  const r = await idem.claim(pool, key, { n: 1 }, scope, { lease: 30 });
  assert.equal(r.outcome, 'reclaimed');
  assert.equal(r.recoveryPoint, 'step-1');
  assert.notEqual(r.token, c.token);
  // the first attempt's token is stale now
  await assert.rejects(idem.checkpoint(pool, key, 'step-2', scope, c.token),
    (err) => err.code === 'IK002' && err.kind === 'stale_token' && err.status === 409 && err.retryable);
  await idem.complete(pool, key, 200, { done: true }, scope, r.token);
  assert.equal((await keyRow(pool, key, scope)).status, 'completed');
  await assert.rejects(idem.heartbeat(pool, key, scope, r.token),
    (err) => err.code === 'IK003' && err.status === 409);
});

test('release gives a committed claim up: the next claim is new', async () => {
  const key = newKey();
  const c = await idem.claim(pool, key, null, 'client-test', { lease: 30 });
  await idem.release(pool, key, 'client-test', c.token);
  assert.equal(await keyRow(pool, key, 'client-test'), null);
  const again = await idem.claim(pool, key, null, 'client-test', { lease: 30 });
  assert.equal(again.outcome, 'new');
  await idem.fail(pool, key, 'client-test', again.token, { status: 400, response: { error: 'no' }, retryable: false });
  const replay = await idem.claim(pool, key, null, 'client-test', { lease: 30 });
  assert.equal(replay.outcome, 'replay');
  assert.equal(replay.responseCode, 400);
  assert.equal(replay.response, '{"error": "no"}');
});
