'use strict';
// A service killed (SIGKILL) between claim and complete, then the request
// retried on another instance: exactly one payment, and in card mode exactly
// one authorization.  The kill happens at a known point, never after a
// guessed delay: the test holds a lock on payments (so the service's INSERT
// waits) or holds the card network's answer.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const lib = require('./lib');

let network;
let survivor;
const SCOPE = lib.uid('crash-merchant');

before(async () => {
  network = await lib.startCardNetwork();
  survivor = await lib.startService({ CARD_NETWORK_URL: network.url });
});

after(async () => {
  await lib.stopAll();
  await network.close();
});

// A second instance that will be killed; its short lease lets the
// survivor take the key over soon after.
const victim = () => lib.startService({ CARD_NETWORK_URL: network.url, LEASE_SECONDS: '2' });

test('default mode: killed after the claim, before commit; the retry pays once', async () => {
  const svc = await victim();
  const key = lib.uid('crash-tx');
  const order = lib.uid('order-crash-tx');
  const req = { key, scope: SCOPE, body: { order, amount: 1234 } };
  const lock = await lib.lockPayments();
  let pending;
  try {
    pending = lib.pay(svc, req).catch(() => null);
    await lib.waitForBlockedInsert();
    await lib.kill(svc);
  } finally {
    await lock.release();
  }
  await pending;
  const r = await lib.payUntilSettled(survivor, req);
  assert.equal(r.status, 201, r.text);
  assert.equal(r.headers.get('idempotent-replayed'), null, 'the dead transaction left nothing to replay');
  assert.equal(await lib.countPayments(SCOPE, order), 1);
  const again = await lib.pay(survivor, req);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(again.text, r.text);
});

test('card mode: killed while the card network authorizes; the retry does not authorize again', async () => {
  const svc = await victim();
  const key = lib.uid('crash-card-call');
  const order = lib.uid('order-crash-card-call');
  const req = { key, scope: SCOPE, card: true, body: { order, amount: 2345 } };
  network.hold(SCOPE, key);
  let pending;
  try {
    pending = lib.pay(svc, req).catch(() => null);
    await lib.waitFor('the authorization request', () => network.authorizations(SCOPE, key).length === 1);
    await lib.kill(svc); // authorized at the network; the service never heard back
  } finally {
    network.release();
  }
  await pending;
  const r = await lib.payUntilSettled(survivor, req);
  assert.equal(r.status, 201, r.text);
  const auths = network.authorizations(SCOPE, key);
  assert.equal(auths.length, 1, `${auths.length} authorizations`);
  assert.equal(r.json().authorization_id, auths[0], 'the retry uses the first authorization');
  assert.equal(await lib.countPayments(SCOPE, order), 1);
});

test('card mode: killed after the authorization, before the payment commits; the retry resumes from the recovery point', async () => {
  const svc = await victim();
  const key = lib.uid('crash-card-after');
  const order = lib.uid('order-crash-card-after');
  const req = { key, scope: SCOPE, card: true, body: { order, amount: 3456 } };
  const lock = await lib.lockPayments();
  let pending;
  try {
    pending = lib.pay(svc, req).catch(() => null);
    await lib.waitForBlockedInsert();
    const row = await lib.keyRow(SCOPE, key);
    assert.equal(row.status, 'processing');
    const auths = network.authorizations(SCOPE, key);
    assert.equal(auths.length, 1);
    assert.ok(row.recoveryPoint.includes(auths[0]),
      `the recovery point names the authorization: '${row.recoveryPoint}'`);
    await lib.kill(svc);
  } finally {
    await lock.release();
  }
  await pending;
  const lookupsBefore = network.lookups(SCOPE, key);
  const r = await lib.payUntilSettled(survivor, req);
  assert.equal(r.status, 201, r.text);
  const auths = network.authorizations(SCOPE, key);
  assert.equal(auths.length, 1, `${auths.length} authorizations`);
  assert.equal(r.json().authorization_id, auths[0]);
  assert.equal(network.lookups(SCOPE, key), lookupsBefore, 'resumed from the recovery point, without asking the network');
  assert.equal(await lib.countPayments(SCOPE, order), 1);
  assert.equal((await lib.keyRow(SCOPE, key)).status, 'completed');
});
