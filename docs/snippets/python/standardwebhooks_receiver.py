"""A hookrelay webhook receiver in Python with the `standardwebhooks` package
(pip install standardwebhooks). Run: WEBHOOK_SECRET=whsec_… PORT=8000 python3 standardwebhooks_receiver.py"""
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

wh = Webhook(os.environ["WEBHOOK_SECRET"])  # the endpoint's whsec_… secret
seen = set()  # webhook-ids already handled; use a unique key in your database instead


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))  # the raw bytes
        try:
            event = wh.verify(raw, dict(self.headers))  # signature, and a timestamp within 5 minutes
        except WebhookVerificationError:
            self.send_response(400)
            self.end_headers()
            return
        webhook_id = self.headers["webhook-id"]
        if webhook_id not in seen:
            seen.add(webhook_id)
            print(f"verified {webhook_id} {event['type']}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
