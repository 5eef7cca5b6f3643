'use strict';
// The Idempotency-Key protocol over HTTP, default mode (one transaction):
// what every example service must answer.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const lib = require('./lib');

let svc;
let network;
const SCOPE = lib.uid('merchant');

before(async () => {
  network = await lib.startCardNetwork();
  svc = await lib.startService({ CARD_NETWORK_URL: network.url });
});

after(async () => {
  await lib.stopAll();
  await network.close();
});

test('no Idempotency-Key: 400 problem+json, nothing paid', async () => {
  const order = lib.uid('no-key');
  const r = await lib.pay(svc, { scope: SCOPE, body: { order, amount: 100 } });
  lib.assertProblem(r, 400);
  assert.equal(await lib.countPayments(SCOPE, order), 0);
});

test('first request 201; its replay is byte-identical, with Idempotent-Replayed: true', async () => {
  const key = lib.uid('first');
  const order = lib.uid('order-first');
  const body = { order, amount: 3000, currency: 'EUR' };
  const first = await lib.pay(svc, { key, scope: SCOPE, body });
  assert.equal(first.status, 201, first.text);
  assert.equal(first.headers.get('idempotent-replayed'), null);
  assert.match(first.headers.get('content-type'), /^application\/json/);
  const payment = first.json();
  assert.equal(typeof payment.payment_id, 'number');
  assert.equal(payment.order, order);
  assert.equal(payment.amount, 3000);

  for (let i = 0; i < 2; i++) {
    const again = await lib.pay(svc, { key, scope: SCOPE, body });
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.headers.get('content-type'), first.headers.get('content-type'));
    assert.equal(again.text, first.text, 'replay bytes differ from the first answer');
  }
  assert.equal(await lib.countPayments(SCOPE, order), 1);
});

test('the same body with its keys reordered and other spacing replays', async () => {
  const key = lib.uid('reorder');
  const order = lib.uid('order-reorder');
  const first = await lib.pay(svc, { key, scope: SCOPE, body: `{"order":"${order}","amount":250,"currency":"USD"}` });
  assert.equal(first.status, 201, first.text);
  const again = await lib.pay(svc, {
    key, scope: SCOPE, body: `{\n  "currency" : "USD",\n  "amount": 250,   "order": "${order}"\n}`,
  });
  assert.equal(again.status, 201, again.text);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(again.text, first.text);
  assert.equal(await lib.countPayments(SCOPE, order), 1);
});

test('the same key with a different body: 422 problem+json, nothing paid, the first still replays', async () => {
  const key = lib.uid('mismatch');
  const order = lib.uid('order-mismatch');
  const first = await lib.pay(svc, { key, scope: SCOPE, body: { order, amount: 700 } });
  assert.equal(first.status, 201, first.text);
  const other = await lib.pay(svc, { key, scope: SCOPE, body: { order, amount: 701 } });
  lib.assertProblem(other, 422);
  const otherOrder = await lib.pay(svc, { key, scope: SCOPE, body: { order: `${order}-x`, amount: 700 } });
  lib.assertProblem(otherOrder, 422);
  assert.equal(await lib.countPayments(SCOPE, order), 1);
  assert.equal(await lib.countPayments(SCOPE, `${order}-x`), 0);
  const again = await lib.pay(svc, { key, scope: SCOPE, body: { order, amount: 700 } });
  assert.equal(again.text, first.text);
});

test('20 concurrent duplicates: one payment, one first answer, 19 byte-identical replays', async () => {
  const key = lib.uid('burst');
  const order = lib.uid('order-burst');
  const rs = await Promise.all(Array.from({ length: 20 },
    () => lib.pay(svc, { key, scope: SCOPE, body: { order, amount: 500 } })));
  for (const r of rs) assert.equal(r.status, 201, r.text);
  assert.equal(rs.filter((r) => r.headers.get('idempotent-replayed') !== 'true').length, 1);
  for (const r of rs) assert.equal(r.text, rs[0].text);
  assert.equal(await lib.countPayments(SCOPE, order), 1);
});

test('WAIT_FOR_DUPLICATES=false: 20 concurrent duplicates get 409 + Retry-After or the replay, one payment', async () => {
  const nowait = await lib.startService({ CARD_NETWORK_URL: network.url, WAIT_FOR_DUPLICATES: 'false' });
  const key = lib.uid('burst-nowait');
  const order = lib.uid('order-burst-nowait');
  const req = { key, scope: SCOPE, body: { order, amount: 501 } };
  const rs = await Promise.all(Array.from({ length: 20 }, () => lib.pay(nowait, req)));
  const firsts = rs.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') !== 'true');
  assert.equal(firsts.length, 1);
  for (const r of rs) {
    if (r.status === 409) {
      lib.assertProblem(r);
      assert.ok(Number(r.headers.get('retry-after')) >= 1);
    } else {
      assert.equal(r.status, 201, r.text);
      assert.equal(r.text, firsts[0].text);
    }
  }
  const again = await lib.payUntilSettled(nowait, req);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(again.text, firsts[0].text);
  assert.equal(await lib.countPayments(SCOPE, order), 1);
  await lib.kill(nowait);
});

test('another Merchant-Id (scope) is independent: same key, its own payment', async () => {
  const key = lib.uid('scoped');
  const order = lib.uid('order-scoped');
  const other = lib.uid('other-merchant');
  const a = await lib.pay(svc, { key, scope: SCOPE, body: { order, amount: 900 } });
  assert.equal(a.status, 201, a.text);
  const b = await lib.pay(svc, { key, scope: other, body: { order, amount: 1900 } });
  assert.equal(b.status, 201, b.text);
  assert.equal(b.headers.get('idempotent-replayed'), null);
  assert.notEqual(b.json().payment_id, a.json().payment_id);
  assert.equal(await lib.countPayments(SCOPE, order), 1);
  assert.equal(await lib.countPayments(other, order), 1);
  const againA = await lib.pay(svc, { key, scope: SCOPE, body: { order, amount: 900 } });
  assert.equal(againA.text, a.text);
});

// Each bad request gets a 4xx problem+json without a stack trace, in both
// modes, and claims nothing: the key is free afterwards.
const BAD = [
  ['malformed JSON', '{"order": "x", "amount": ', 400],
  ['empty body', '', 400],
  ['JSON array', '[{"order": "x", "amount": 1}]', 422],
  ['JSON string', '"pay me"', 422],
  ['JSON null', 'null', 422],
  ['missing amount', '{"order": "x"}', 422],
  ['missing order', '{"amount": 5}', 422],
  ['amount 1.5', '{"order": "x", "amount": 1.5}', 422],
  ['amount 1e20', '{"order": "x", "amount": 1e20}', 422],
  ['amount "12"', '{"order": "x", "amount": "12"}', 422],
  ['amount -5', '{"order": "x", "amount": -5}', 422],
  ['amount 0', '{"order": "x", "amount": 0}', 422],
  ['amount null', '{"order": "x", "amount": null}', 422],
  ['order a number', '{"order": 17, "amount": 5}', 422],
  ['order too long', `{"order": "${'o'.repeat(65)}", "amount": 5}`, 422],
  ['currency lower case', '{"order": "x", "amount": 5, "currency": "eur"}', 422],
  // valid JSON that PostgreSQL's jsonb refuses
  ['\\u0000 in a string', '{"order": "x\\u0000", "amount": 5}', 400],
  ['number beyond numeric', '{"order": "x", "amount": 5, "note": 1e1000000}', 400],
];

for (const card of [false, true]) {
  const mode = card ? 'card mode' : 'default mode';
  test(`bad input (${mode}): 4xx problem+json, never 5xx, no key left claimed`, async () => {
    let i = 0;
    for (const [what, body, status] of BAD) {
      const key = lib.uid(`bad-${card}-${i++}`);
      const r = await lib.pay(svc, { key, scope: SCOPE, body, card });
      assert.equal(r.status, status, `${what}: ${r.status} ${r.text}`);
      lib.assertProblem(r);
      assert.equal(await lib.keyRow(SCOPE, key), null, `${what}: the key was claimed`);
    }
    for (const [what, contentType] of [['text/plain', 'text/plain'], ['form', 'application/x-www-form-urlencoded'], ['no Content-Type', null]]) {
      const key = lib.uid(`bad-type-${card}-${what}`);
      const r = await lib.pay(svc, { key, scope: SCOPE, body: '{"order": "x", "amount": 5}', card, contentType });
      assert.equal(r.status, 415, `${what}: ${r.status} ${r.text}`);
      lib.assertProblem(r);
      assert.equal(await lib.keyRow(SCOPE, key), null);
    }
    // The key of a rejected request is free: a valid request with it is new
    // (in card mode an invalid body used to leave it processing).
    const key = lib.uid(`bad-${card}-0`);
    const order = lib.uid(`order-after-bad-${card}`);
    const ok = await lib.pay(svc, { key, scope: SCOPE, body: { order, amount: 5 }, card });
    assert.equal(ok.status, 201, ok.text);
    assert.equal(ok.headers.get('idempotent-replayed'), null);
  });
}

test('an over-long Idempotency-Key or Merchant-Id: 400 problem+json, nothing stored', async () => {
  const order = lib.uid('order-long');
  const longKey = `${lib.uid('long')}-${'k'.repeat(300)}`;
  for (const card of [false, true]) {
    const r = await lib.pay(svc, { key: longKey, scope: SCOPE, body: { order, amount: 5 }, card });
    lib.assertProblem(r, 400);
    const s = await lib.pay(svc, { key: lib.uid('long-scope'), scope: 'm'.repeat(300), body: { order, amount: 5 }, card });
    lib.assertProblem(s, 400);
  }
  assert.equal(await lib.countPayments(SCOPE, order), 0);
  assert.equal(await lib.psql(`SELECT count(*) FROM idempotency_keys WHERE length(key) > 255 OR length(scope) > 255`), '0');
});
