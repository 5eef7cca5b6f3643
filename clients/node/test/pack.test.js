'use strict';
// The package as users get it: npm pack, the tarball installed into a fresh
// app (offline: it has no dependencies of its own; pg and express, its peer
// dependencies, are the ones these tests run with, linked into the app),
// required by name there, and a request run through it against the
// database the environment names.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { newKey } = require('./helpers');

const PKG = path.resolve(__dirname, '..');

// The app: the middleware in front of a payment handler, two requests with
// one key, the answers printed as JSON.
const APP = `'use strict';
const http = require('node:http');
const express = require('express');
const { Pool } = require('pg');
const { idempotency } = require('pg-idempotency');

const pool = new Pool({ max: 2 });
const outcomes = [];
const app = express();
app.post('/payments', idempotency({ pool, scope: () => 'pack-test', onOutcome: (e) => outcomes.push(e.outcome) }),
  async (req) => {
    const idem = req.idempotency;
    try {
      const r = await (await idem.tx()).query(
        "INSERT INTO payments (scope, order_id, amount) VALUES ($1, $2, $3) RETURNING jsonb_build_object('payment_id', id)::text AS j",
        [idem.scope, idem.body.order, idem.body.amount]);
      await idem.respond(201, r.rows[0].j);
    } catch (err) {
      await idem.error(err);
    }
  });
const server = http.createServer(app).listen(0, '127.0.0.1', async () => {
  const url = 'http://127.0.0.1:' + server.address().port + '/payments';
  const send = () => fetch(url, { method: 'POST', body: JSON.stringify({ order: 'pack', amount: 1 }),
    headers: { 'Idempotency-Key': process.argv[2], 'Content-Type': 'application/json' } })
    .then(async (r) => ({ status: r.status, replayed: r.headers.get('idempotent-replayed'), text: await r.text() }));
  const answers = [await send(), await send()];
  console.log(JSON.stringify({ answers, outcomes, resolved: require.resolve('pg-idempotency') }));
  server.close();
  await pool.end();
});
`;

test('npm pack, installed into a fresh app, required by name, answers a request and its replay', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-idempotency-pack-'));
  test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const env = { ...process.env, npm_config_cache: path.join(tmp, 'npm-cache'), npm_config_update_notifier: 'false',
    npm_config_audit: 'false', npm_config_fund: 'false' };

  const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', tmp],
    { cwd: PKG, env, encoding: 'utf8' }))[0];
  assert.equal(packed.name, 'pg-idempotency');
  assert.equal(packed.version, '0.4.0');
  const files = packed.files.map((f) => f.path).sort();
  for (const f of ['README.md', 'index.d.ts', 'index.js', 'lib/client.js', 'lib/middleware.js', 'package.json'])
    assert.ok(files.includes(f), `${f} missing from the tarball: ${files}`);
  assert.ok(!files.some((f) => f.startsWith('test/')), `tests in the tarball: ${files}`);

  const app = path.join(tmp, 'app');
  fs.mkdirSync(path.join(app, 'node_modules'), { recursive: true });
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  // pg and express as this test finds them (npm ci's, or Debian's through NODE_PATH)
  for (const dep of ['pg', 'express'])
    fs.symlinkSync(path.dirname(require.resolve(`${dep}/package.json`)), path.join(app, 'node_modules', dep), 'dir');
  execFileSync('npm', ['install', '--offline', '--legacy-peer-deps', '--no-package-lock',
    path.join(tmp, packed.filename)], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const installed = path.join(app, 'node_modules', 'pg-idempotency');
  assert.ok(!fs.lstatSync(installed).isSymbolicLink(), 'installed as a link, not from the tarball');
  const manifest = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8'));
  assert.equal(manifest.license, 'PostgreSQL');
  assert.ok(fs.existsSync(path.join(installed, manifest.types)), 'the types file is missing');

  fs.writeFileSync(path.join(app, 'app.js'), APP);
  const key = newKey();
  const out = JSON.parse(execFileSync(process.execPath, ['app.js', key],
    { cwd: app, env: process.env, encoding: 'utf8', timeout: 120000 }));
  assert.equal(fs.realpathSync(out.resolved), fs.realpathSync(path.join(installed, 'index.js')));
  const [first, again] = out.answers;
  assert.equal(first.status, 201, first.text);
  assert.match(first.text, /^\{"payment_id": [0-9]+\}$/);
  assert.equal(again.status, 201);
  assert.equal(again.replayed, 'true');
  assert.equal(again.text, first.text);
  assert.deepEqual(out.outcomes, ['new', 'replay']);
});
