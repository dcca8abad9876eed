// Tests of receiver.js: run with `npm test` (node --test) in e2e/receiver.
// Each test starts a real receiver on a free loopback port and signs requests
// with the standardwebhooks package, as hookrelay would.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { test } = require('node:test');
const { Webhook } = require('standardwebhooks');

const SECRET = 'whsec_' + crypto.randomBytes(32).toString('base64');

// start launches a receiver and resolves once it printed its ready line.
function start(t, args) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'receiver-test-'));
  const log = path.join(dir, 'requests.jsonl');
  const child = spawn(process.execPath, [path.join(__dirname, 'receiver.js'), '--log', log, ...args], {
    env: { ...process.env, RECEIVER_SECRET: SECRET },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.after(() => {
    child.kill('SIGTERM');
    return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on('exit', resolve)));
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (b) => {
      out += b;
      const m = /ready url=(\S+)/.exec(out);
      if (m) resolve({ url: m[1], log, child });
    });
    child.on('exit', (code) => reject(new Error(`receiver exited ${code} before ready: ${out}`)));
  });
}

// send posts body signed for id (tampered: the body changes after signing).
async function send(url, id, body, { tampered = false, secret = SECRET, signal } = {}) {
  const ts = new Date();
  const sig = new Webhook(secret).sign(id, ts, body);
  const res = await fetch(url + '/hook', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(ts.getTime() / 1000)),
      'webhook-signature': sig,
    },
    body: tampered ? body.replace('}', ',"x":1}') : body,
    signal,
  });
  await res.arrayBuffer();
  return res;
}

async function stats(url) {
  return (await fetch(url + '/stats?ids=1')).json();
}

const body = JSON.stringify({ type: 'push', timestamp: '2024-01-01T00:00:00Z', data: { ref: 'refs/heads/main' } });

test('fast verifies, answers 200 and logs every request', async (t) => {
  const { url, log } = await start(t, ['--behaviour', 'fast']);
  assert.equal((await send(url, 'msg_a', body)).status, 200);
  assert.equal((await send(url, 'msg_a', body)).status, 200);
  assert.equal((await send(url, 'msg_b', body, { tampered: true })).status, 401);
  assert.equal((await send(url, 'msg_c', body, { secret: 'whsec_' + crypto.randomBytes(32).toString('base64') })).status, 401);
  const s = await stats(url);
  assert.equal(s.requests, 4);
  assert.equal(s.verified, 2);
  assert.equal(s.failed, 2);
  assert.equal(s.duplicates, 1);
  assert.deepEqual(s.ids.msg_a, { requests: 2, ok: 2 });
  assert.equal(s.failures.length, 2);
  const lines = fs.readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, 4);
  assert.equal(lines[0].type, 'push');
  assert.equal(lines[0].sha256, crypto.createHash('sha256').update(body).digest('hex'));
  assert.equal(lines[1].n, 2);
  assert.equal(lines[2].verified, false);
  assert.match(lines[2].error, /No matching signature/);
});

test('fail-first answers 500 then 200 per webhook-id', async (t) => {
  const { url } = await start(t, ['--behaviour', 'fail-first']);
  const got = [];
  for (const id of ['e1', 'e1', 'e2', 'e1', 'e2']) got.push((await send(url, id, body)).status);
  assert.deepEqual(got, [500, 200, 500, 200, 200]);
});

test('hostile answers 500, 429 with Retry-After, then 200', async (t) => {
  const { url } = await start(t, ['--behaviour', 'hostile', '--retry-after', '7']);
  const a = await send(url, 'h1', body);
  const b = await send(url, 'h1', body);
  const c = await send(url, 'h1', body);
  assert.deepEqual([a.status, b.status, c.status], [500, 429, 200]);
  assert.equal(b.headers.get('retry-after'), '7');
});

test('slow answers after the delay and counts concurrency', async (t) => {
  const { url } = await start(t, ['--behaviour', 'slow', '--delay-ms', '300']);
  const t0 = Date.now();
  const res = await Promise.all([1, 2, 3].map((i) => send(url, 's' + i, body)));
  assert.ok(res.every((r) => r.status === 200));
  assert.ok(Date.now() - t0 >= 300, 'answered before the delay');
  const s = await stats(url);
  assert.equal(s.peak_in_flight, 3);
  assert.equal(s.in_flight, 0);
});

test('hang never answers and holds the request in flight', async (t) => {
  const { url } = await start(t, ['--behaviour', 'hang']);
  const ctl = new AbortController();
  const pending = send(url, 'g1', body, { signal: ctl.signal }).catch((e) => e);
  let s;
  for (let i = 0; i < 100; i++) {
    s = await stats(url);
    if (s.verified === 1) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(s.verified, 1);
  assert.equal(s.in_flight, 1);
  ctl.abort();
  assert.equal((await pending).name, 'AbortError');
  for (let i = 0; i < 100; i++) {
    s = await stats(url);
    if (s.in_flight === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(s.in_flight, 0);
  assert.equal(s.aborted, 1);
});

test('bad configuration exits 2 naming the flag', async () => {
  const child = spawn(process.execPath, [path.join(__dirname, 'receiver.js'), '--behaviour', 'nope', '--secret', SECRET], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (b) => (err += b));
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 2);
  assert.match(err, /--behaviour "nope"/);
});
