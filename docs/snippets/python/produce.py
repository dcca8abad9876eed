"""Produce one CloudEvent (structured JSON) to hookrelay's events topic from Python
with confluent-kafka (pip install confluent-kafka), inside a Kafka transaction.
Run: BROKERS=127.0.0.1:9092 TOPIC=hookrelay.events python3 produce.py"""
import json
import os
import uuid
from datetime import datetime, timezone

from confluent_kafka import Producer

producer = Producer({
    "bootstrap.servers": os.environ.get("BROKERS", "127.0.0.1:9092"),
    "enable.idempotence": True,  # acks=all, no duplicates on a retry
    "transactional.id": os.environ.get("TRANSACTIONAL_ID", "billing-" + uuid.uuid4().hex),  # stable per instance
})
producer.init_transactions()

event_id = "evt_" + uuid.uuid4().hex  # with source, it makes the webhook-id: reuse it on a retry
event = {
    "specversion": "1.0",
    "id": event_id,
    "source": "/billing",
    "type": "invoice.paid",
    "time": datetime.now(timezone.utc).isoformat(),
    "datacontenttype": "application/json",
    "data": {"invoice": "in_1", "total": 4200, "note": "Grüße <b>&amp;</b>"},
}
if os.environ.get("TENANT"):
    event["tenantid"] = os.environ["TENANT"]

producer.begin_transaction()
producer.produce(
    os.environ.get("TOPIC", "hookrelay.events"),
    key="in_1",  # the entity: its events are fanned out in order
    value=json.dumps(event, ensure_ascii=False).encode("utf-8"),
    headers={"content-type": "application/cloudevents+json"},
)
producer.commit_transaction()  # flushes; raises on failure (then abort_transaction and retry)
print(f"published {event_id}")
