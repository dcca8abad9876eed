"""A hookrelay webhook receiver in Python with nothing but the standard library.
Run: WEBHOOK_SECRET=whsec_… PORT=8000 python3 hmac_receiver.py"""
import base64
import hashlib
import hmac
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY = base64.b64decode(os.environ["WEBHOOK_SECRET"].removeprefix("whsec_"))
TOLERANCE_S = 5 * 60
seen = set()  # webhook-ids already handled; use a unique key in your database instead


def verify(raw: bytes, headers) -> bool:
    msg_id, ts, sigs = headers.get("webhook-id"), headers.get("webhook-timestamp"), headers.get("webhook-signature")
    if not (msg_id and ts and sigs and ts.isdigit()):
        return False
    if abs(time.time() - int(ts)) > TOLERANCE_S:  # too old (or too new): a replay
        return False
    expected = hmac.new(KEY, f"{msg_id}.{ts}.".encode() + raw, hashlib.sha256).digest()  # raw body bytes
    for sig in sigs.split(" "):
        version, _, b64 = sig.partition(",")
        try:
            got = base64.b64decode(b64, validate=True)
        except ValueError:
            continue
        if version == "v1" and hmac.compare_digest(got, expected):
            return True
    return False


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        if not verify(raw, self.headers):
            self.send_response(400)
            self.end_headers()
            return
        event = json.loads(raw)  # parse only after verifying
        webhook_id = self.headers["webhook-id"]
        if webhook_id not in seen:
            seen.add(webhook_id)
            print(f"verified {webhook_id} {event['type']}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
