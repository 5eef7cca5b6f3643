'use strict';
// Card mode (?mode=card): the claim is committed with a lease, the card
// network is called outside any transaction, heartbeats keep the lease, and
// the result is recorded with the claim's token.  Two instances of the
// service share the database, as behind a load balancer.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const lib = require('./lib');

const LEASE_SECONDS = 8;
// How long a card-mode retry waits for the request in flight (the services'
// AWAIT_RESULT_SECONDS, set here so that every language runs the same).
const AWAIT_RESULT_SECONDS = 3;
// Test 2's retry waits for A's answer, released only once the wait is seen:
// a third instance that waits 30 s, so that a loaded machine does not end
// the wait first (a 409, not the answer).
const PATIENT_AWAIT_SECONDS = 30;
let network;
let a;
let b;
let patient;
const SCOPE = lib.uid('card-merchant');

before(async () => {
  network = await lib.startCardNetwork();
  const env = { CARD_NETWORK_URL: network.url, LEASE_SECONDS: String(LEASE_SECONDS),
    AWAIT_RESULT_SECONDS: String(AWAIT_RESULT_SECONDS) };
  [a, b, patient] = await Promise.all([lib.startService(env), lib.startService(env),
    lib.startService({ ...env, AWAIT_RESULT_SECONDS: String(PATIENT_AWAIT_SECONDS) })]);
});

after(async () => {
  await lib.stopAll();
  await network.close();
});

test('card payment: 201 with the authorization; replays on either instance are byte-identical', async () => {
  const key = lib.uid('card-one');
  const order = lib.uid('order-card-one');
  const body = { order, amount: 4200, currency: 'EUR' };
  const first = await lib.pay(a, { key, scope: SCOPE, body, card: true });
  assert.equal(first.status, 201, first.text);
  assert.equal(first.headers.get('idempotent-replayed'), null);
  const auths = network.authorizations(SCOPE, key);
  assert.equal(auths.length, 1);
  assert.equal(first.json().authorization_id, auths[0]);
  for (const svc of [a, b, a]) {
    const again = await lib.pay(svc, { key, scope: SCOPE, body, card: true });
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.text, first.text);
  }
  assert.equal(network.authorizations(SCOPE, key).length, 1);
  assert.equal(await lib.countPayments(SCOPE, order), 1);
  assert.equal((await lib.keyRow(SCOPE, key)).status, 'completed');
});

test('a retry that arrives during a card call longer than the lease waits for it: 201 with the first answer, not 409', async () => {
  const key = lib.uid('card-retry');
  const order = lib.uid('order-card-retry');
  const req = { key, scope: SCOPE, card: true, body: { order, amount: 1500, currency: 'EUR' } };
  // The card network holds this payment's answer: A's request stays in flight.
  network.hold(SCOPE, key);
  let first;
  let retry;
  try {
    first = lib.pay(a, req);
    await lib.waitFor('the authorization request at the card network',
      () => network.authorizations(SCOPE, key).length === 1);
    // Longer than the lease: A's heartbeats keep the key A's (B would
    // otherwise take it over and answer without the replay header).  One
    // key, so its heartbeats wait for no other key's (test 3's 50 may lapse
    // on a loaded machine).
    await lib.sleep((LEASE_SECONDS * 1.5) * 1000);
    // The retry, on another instance, while A is at the card network: its
    // claim waits (await_result) in the database.
    retry = lib.pay(patient, req);
    await lib.waitFor("the retry's claim waiting for the first request", async () =>
      Number(await lib.psql(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                             AND wait_event_type = 'Extension' AND query LIKE '%await_result%'`)) > 0);
  } finally {
    network.release();
  }
  const [f, r] = await Promise.all([first, retry]);
  assert.equal(f.status, 201, f.text);
  assert.equal(r.status, 201, `the retry got ${r.status} (${r.text}), not the first answer`);
  assert.equal(r.headers.get('idempotent-replayed'), 'true');
  assert.equal(r.text, f.text);
  assert.equal(network.authorizations(SCOPE, key).length, 1);
  assert.equal(await lib.countPayments(SCOPE, order), 1);
});

test('50 card payments in flight, retried on a second instance: one authorization and one payment each', async (t) => {
  const N = 50;
  const reqs = Array.from({ length: N }, (_, i) => ({
    key: lib.uid(`card-load-${i}`), scope: SCOPE, card: true,
    body: { order: lib.uid(`order-card-load-${i}`), amount: 100 + i },
  }));
  // The card network holds every answer: all 50 stay in flight on instance A.
  network.hold();
  // While the network holds its answers no first request can be answered:
  // one that is (a 500, say) fails the test at once, with its answer,
  // instead of after the wait's two minutes.
  let early = null;
  const firsts = Promise.all(reqs.map((r) => lib.pay(a, r).then((res) => {
    early = early || res;
    return res;
  })));
  let released = false;
  const takenOver = new Map(); // index -> B's first 201
  try {
    await lib.waitFor('all 50 authorization requests at the card network', () => {
      if (early) throw new Error(`a first request was answered (${early.status}: ${early.text}) while the card network held every answer; the network had ${network.counts()}`);
      return reqs.every((r) => network.authorizations(r.scope, r.key).length >= 1);
    });

    // Retries on B while A holds the keys: 409 with Retry-After once their
    // AWAIT_RESULT_SECONDS ran out, nothing authorized again.  On a machine
    // loaded enough that A's heartbeats come later than the lease, B takes
    // a key over (A's claim is lost, as designed): B then finds A's
    // authorization at the card network and answers 201 with it, never
    // authorizing again.  Such a key is counted, and checked below.
    const retry = async () => {
      const rs = await Promise.all(reqs.map((r) => lib.pay(b, r)));
      rs.forEach((res, i) => {
        const r = reqs[i];
        if (res.status === 201) {
          assert.deepEqual(network.authorizations(r.scope, r.key), [res.json().authorization_id],
            `${r.key}: taken over by B, which answered ${res.text}`);
          takenOver.set(i, takenOver.get(i) || res.text);
          return;
        }
        lib.assertProblem(res, 409);
        assert.ok(Number(res.headers.get('retry-after')) >= 1);
      });
    };
    await retry();
    // Longer than the lease: only A's heartbeats keep the keys A's.  (If
    // they stopped, B would take every key over.)
    await lib.sleep((LEASE_SECONDS * 1.5) * 1000);
    await retry();
    for (const r of reqs) assert.equal(network.authorizations(r.scope, r.key).length, 1, r.key);
    network.release();
    released = true;
  } finally {
    if (!released) network.release();
  }
  const answers = await firsts;
  // A's answers: 201, or, for a key B took over, the 409 of a lost claim
  answers.forEach((r, i) => {
    if (takenOver.has(i) && r.status === 409) lib.assertProblem(r, 409);
    else assert.equal(r.status, 201, r.text);
  });
  if (takenOver.size > 0)
    t.diagnostic(`${takenOver.size} of ${N} keys taken over by B: A's heartbeats came later than the lease`);

  // Every retry now replays the one answer recorded, byte for byte.
  const replays = await Promise.all(reqs.map((r) => lib.pay(b, r)));
  replays.forEach((r, i) => {
    assert.equal(r.status, 201, r.text);
    assert.equal(r.headers.get('idempotent-replayed'), 'true');
    assert.equal(r.text, answers[i].status === 201 ? answers[i].text : takenOver.get(i));
  });
  for (const [i, r] of reqs.entries()) {
    const auths = network.authorizations(r.scope, r.key);
    assert.equal(auths.length, 1, `${r.key}: ${auths.length} authorizations`);
    assert.equal(JSON.parse(replays[i].text).authorization_id, auths[0]);
    assert.equal(await lib.countPayments(r.scope, r.body.order), 1);
  }
});
