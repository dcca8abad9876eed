// A hookrelay webhook receiver in Node with nothing but node:crypto.
// Run: WEBHOOK_SECRET=whsec_… PORT=8000 node crypto.js
const http = require('node:http');
const crypto = require('node:crypto');

const key = Buffer.from(process.env.WEBHOOK_SECRET.replace(/^whsec_/, ''), 'base64');
const TOLERANCE_S = 5 * 60;
const seen = new Set(); // webhook-ids already handled; use a unique key in your database instead

function verify(raw, headers) {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  if (!id || !ts || !sigs || !/^\d+$/.test(ts)) return false;
  if (Math.abs(Date.now() / 1000 - Number(ts)) > TOLERANCE_S) return false; // too old (or too new): a replay
  const expected = crypto.createHmac('sha256', key)
    .update(`${id}.${ts}.`).update(raw) // over the raw body bytes
    .digest();
  return sigs.split(' ').some((s) => {
    const [version, b64] = s.split(',');
    const got = Buffer.from(b64 ?? '', 'base64');
    return version === 'v1' && got.length === expected.length && crypto.timingSafeEqual(got, expected);
  });
}

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    if (!verify(raw, req.headers)) {
      res.writeHead(400).end();
      return;
    }
    const id = req.headers['webhook-id'];
    const event = JSON.parse(raw.toString('utf8')); // parse only after verifying
    if (!seen.has(id)) {
      seen.add(id);
      console.log(`verified ${id} ${event.type}`);
    }
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT), '127.0.0.1');
