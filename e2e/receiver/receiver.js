#!/usr/bin/env node
// receiver.js: a local webhook receiver for hookrelay's demo and e2e tests.
//
// It verifies EVERY request's Standard Webhooks signature with the third-party
// `standardwebhooks` package (Webhook(secret).verify(rawBody, headers)) over the
// raw body bytes, answers according to a configured behaviour, and keeps
// counters that GET /stats returns as JSON.
//
// Usage:
//   node receiver.js --secret whsec_... [--port 0] [--host 127.0.0.1]
//                    [--behaviour fast|slow|fail-first|hostile|hang]
//                    [--delay-ms 900] [--retry-after 5] [--log FILE] [--name NAME]
// Every flag can also be given by environment variable (a flag wins):
//   RECEIVER_SECRET, RECEIVER_PORT, RECEIVER_HOST, RECEIVER_BEHAVIOUR,
//   RECEIVER_DELAY_MS, RECEIVER_RETRY_AFTER, RECEIVER_LOG, RECEIVER_NAME.
// Prefer RECEIVER_SECRET over --secret: arguments are visible in ps.
//
// Behaviours (per webhook-id = per event, identical on every attempt):
//   fast        200 at once.
//   slow        200 after --delay-ms milliseconds (default 900).
//   fail-first  500 to the first request of each webhook-id, then 200.
//   hostile     first request 500, second 429 with Retry-After: --retry-after
//               seconds (default 5), then 200.
//   hang        never answers (the connection stays open until the client
//               gives up or the receiver stops).
// A request whose signature does not verify is answered 401 whatever the
// behaviour (a real receiver would reject it), and counted as failed.
//
// Port 0 (the default) picks a free port. Once listening, the receiver prints
// one line to stdout:
//   hookrelay-receiver ready url=http://127.0.0.1:PORT name=NAME behaviour=B pid=PID
// which is what callers wait for. SIGTERM or SIGINT closes every connection
// (hanging ones included), flushes the log and exits 0.
//
// Endpoints:
//   POST any path   a webhook delivery.
//   GET  /stats     counters as JSON; /stats?ids=1 adds per-webhook-id counts.
//   GET  /healthz   200 "ok".
//
// Log (--log FILE): one JSON line per webhook request, appended when it is
// answered (for `hang`, when its body has been read), with: t (arrival, unix
// ms), webhook_id, timestamp (the webhook-timestamp header), n (1 for the
// first request of this webhook-id), status (0 = not answered), verified,
// error (why verification failed), type (the body's "type"), bytes, sha256
// (of the raw body, hex).
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const { parseArgs } = require('node:util');
const { Webhook } = require('standardwebhooks');

const BEHAVIOURS = ['fast', 'slow', 'fail-first', 'hostile', 'hang'];
const MAX_BODY = 1 << 20; // 1 MiB; hookrelay's event limit is 256 KiB
const MAX_FAILURES_KEPT = 20;

function fail(msg) {
  process.stderr.write(`hookrelay-receiver: ${msg}\n`);
  process.exit(2);
}

function config() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        behaviour: { type: 'string' },
        behavior: { type: 'string' },
        secret: { type: 'string' },
        'delay-ms': { type: 'string' },
        'retry-after': { type: 'string' },
        log: { type: 'string' },
        name: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    fail(err.message);
  }
  if (values.help) {
    process.stdout.write(fs.readFileSync(__filename, 'utf8').split('\n').slice(1, 45).join('\n') + '\n');
    process.exit(0);
  }
  const env = process.env;
  const pick = (flag, name, dflt) => values[flag] ?? env[name] ?? dflt;
  const int = (field, raw, min) => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) fail(`${field} ${JSON.stringify(raw)}: want an integer >= ${min}`);
    return n;
  };
  const cfg = {
    host: pick('host', 'RECEIVER_HOST', '127.0.0.1'),
    port: int('--port', pick('port', 'RECEIVER_PORT', '0'), 0),
    behaviour: values.behaviour ?? values.behavior ?? env.RECEIVER_BEHAVIOUR ?? env.RECEIVER_BEHAVIOR ?? 'fast',
    secret: pick('secret', 'RECEIVER_SECRET', ''),
    delayMs: int('--delay-ms', pick('delay-ms', 'RECEIVER_DELAY_MS', '900'), 0),
    retryAfter: int('--retry-after', pick('retry-after', 'RECEIVER_RETRY_AFTER', '5'), 0),
    log: pick('log', 'RECEIVER_LOG', ''),
    name: pick('name', 'RECEIVER_NAME', ''),
  };
  if (cfg.port > 65535) fail(`--port ${cfg.port}: want 0..65535`);
  if (!BEHAVIOURS.includes(cfg.behaviour)) {
    fail(`--behaviour ${JSON.stringify(cfg.behaviour)}: want one of ${BEHAVIOURS.join(', ')}`);
  }
  if (!cfg.secret) fail('--secret (or RECEIVER_SECRET) is required: a whsec_ secret');
  if (!cfg.name) cfg.name = cfg.behaviour;
  return cfg;
}

const cfg = config();

let verifier;
try {
  verifier = new Webhook(cfg.secret);
} catch (err) {
  fail(`--secret: ${err.message}`);
}

const logStream = cfg.log ? fs.createWriteStream(cfg.log, { flags: 'a' }) : null;
if (logStream) logStream.on('error', (err) => fail(`--log ${cfg.log}: ${err.message}`));

// Counters served by GET /stats.
const stats = {
  requests: 0, // webhook requests received (any method but GET)
  verified: 0, // signatures that verified
  failed: 0, // signatures that did not (answered 401)
  statuses: {}, // status answered -> count; "0" = never answered (hang)
  in_flight: 0, // requests received and not yet answered or aborted
  peak_in_flight: 0,
  aborted: 0, // requests the client gave up on before an answer
  first_request_ms: 0,
  last_request_ms: 0,
};
const perId = new Map(); // webhook-id -> { requests, ok } (ok = 2xx answers)
const failures = []; // the last MAX_FAILURES_KEPT verification failures
const hanging = new Set(); // responses never answered (behaviour hang)

function statusFor(n) {
  switch (cfg.behaviour) {
    case 'fail-first':
      return n === 1 ? 500 : 200;
    case 'hostile':
      return n === 1 ? 500 : n === 2 ? 429 : 200;
    case 'hang':
      return 0;
    default:
      return 200;
  }
}

function snapshot(withIds) {
  let duplicates = 0; // webhook-ids answered 2xx more than once
  let ids = 0;
  for (const v of perId.values()) {
    ids++;
    if (v.ok > 1) duplicates++;
  }
  const out = {
    name: cfg.name,
    behaviour: cfg.behaviour,
    delay_ms: cfg.behaviour === 'slow' ? cfg.delayMs : 0,
    ...stats,
    webhook_ids: ids,
    duplicates,
    failures,
  };
  if (withIds) {
    out.ids = {};
    for (const [id, v] of perId) out.ids[id] = v;
  }
  return out;
}

function handleWebhook(req, res) {
  const arrived = Date.now();
  stats.requests++;
  stats.in_flight++;
  if (stats.in_flight > stats.peak_in_flight) stats.peak_in_flight = stats.in_flight;
  if (!stats.first_request_ms) stats.first_request_ms = arrived;
  stats.last_request_ms = arrived;
  let answered = false;
  let open = true;
  res.on('close', () => {
    open = false;
    stats.in_flight--;
    hanging.delete(res);
    if (!answered) stats.aborted++;
  });

  const chunks = [];
  let size = 0;
  let tooBig = false;
  req.on('data', (c) => {
    size += c.length;
    if (size > MAX_BODY) tooBig = true;
    else chunks.push(c);
  });
  req.on('error', () => {}); // an aborted upload: 'close' above accounts for it
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const id = String(req.headers['webhook-id'] ?? '');
    const rec = perId.get(id) ?? { requests: 0, ok: 0 };
    rec.requests++;
    perId.set(id, rec);

    let verified = false;
    let error = '';
    let type = '';
    if (tooBig) {
      error = `body over ${MAX_BODY} bytes`;
    } else {
      try {
        const payload = verifier.verify(body, req.headers);
        verified = true;
        type = payload && typeof payload.type === 'string' ? payload.type : '';
      } catch (err) {
        error = `${err.name}: ${err.message}`;
      }
    }
    if (verified) {
      stats.verified++;
    } else {
      stats.failed++;
      failures.push({ t: arrived, webhook_id: id, error });
      if (failures.length > MAX_FAILURES_KEPT) failures.shift();
    }

    const status = verified ? statusFor(rec.requests) : tooBig ? 413 : 401;
    const entry = {
      t: arrived,
      webhook_id: id,
      timestamp: String(req.headers['webhook-timestamp'] ?? ''),
      n: rec.requests,
      status,
      verified,
      type,
      bytes: body.length,
      sha256: crypto.createHash('sha256').update(body).digest('hex'),
    };
    if (error) entry.error = error;

    const answer = () => {
      if (!open) {
        // The client gave up first (e.g. its timeout is below --delay-ms).
        if (logStream) logStream.write(JSON.stringify({ ...entry, status: 0, aborted: true }) + '\n');
        return;
      }
      answered = true;
      stats.statuses[status] = (stats.statuses[status] ?? 0) + 1;
      if (status >= 200 && status < 300) rec.ok++;
      const headers = { 'content-type': 'application/json' };
      if (status === 429) headers['retry-after'] = String(cfg.retryAfter);
      res.writeHead(status, headers);
      res.end(JSON.stringify({ status, verified, ...(error ? { error } : {}) }) + '\n');
      if (logStream) logStream.write(JSON.stringify(entry) + '\n');
    };
    if (status === 0) {
      stats.statuses[0] = (stats.statuses[0] ?? 0) + 1;
      hanging.add(res);
      if (logStream) logStream.write(JSON.stringify(entry) + '\n');
    } else if (cfg.behaviour === 'slow' && verified) {
      setTimeout(answer, cfg.delayMs);
    } else {
      answer();
    }
  });
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://receiver');
  if (req.method === 'GET' && url.pathname === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(snapshot(url.searchParams.get('ids') === '1')) + '\n');
    return;
  }
  if (req.method === 'GET' && url.pathname === '/healthz') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok\n');
    return;
  }
  if (req.method === 'GET' || req.method === 'HEAD') {
    res.writeHead(404);
    res.end();
    return;
  }
  handleWebhook(req, res);
});
// hookrelay keeps connections alive; let idle ones live longer than its pool
// (Node's default keepAliveTimeout of 5 s races with client reuse).
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.requestTimeout = 0; // `hang` must be able to hold a request forever

server.on('error', (err) => fail(`listen ${cfg.host}:${cfg.port}: ${err.message}`));
server.listen(cfg.port, cfg.host, () => {
  const { port } = server.address();
  process.stdout.write(
    `hookrelay-receiver ready url=http://${cfg.host}:${port} name=${cfg.name} behaviour=${cfg.behaviour} pid=${process.pid}\n`,
  );
});

let stopping = false;
function stop(signal) {
  if (stopping) return;
  stopping = true;
  for (const res of hanging) res.destroy();
  server.close(() => {
    const done = () => process.exit(0);
    if (logStream) logStream.end(done);
    else done();
  });
  server.closeAllConnections();
  setTimeout(() => {
    process.stderr.write(`hookrelay-receiver: ${signal}: forced exit\n`);
    process.exit(1);
  }, 5000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
