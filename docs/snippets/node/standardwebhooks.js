// A hookrelay webhook receiver in Node with the `standardwebhooks` npm package
// (npm install standardwebhooks). Run: WEBHOOK_SECRET=whsec_… PORT=8000 node standardwebhooks.js
const http = require('node:http');
const { Webhook } = require('standardwebhooks');

const wh = new Webhook(process.env.WEBHOOK_SECRET); // the endpoint's whsec_… secret
const seen = new Set(); // webhook-ids already handled; use a unique key in your database instead

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks); // the raw bytes: never JSON.parse then re-stringify before verifying
    let event;
    try {
      event = wh.verify(raw, req.headers); // checks the signature and a timestamp within 5 minutes
    } catch (err) {
      res.writeHead(400).end();
      return;
    }
    const id = req.headers['webhook-id'];
    if (!seen.has(id)) {
      seen.add(id);
      console.log(`verified ${id} ${event.type}`); // hand the event to a queue here; answer fast
    }
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT), '127.0.0.1');
