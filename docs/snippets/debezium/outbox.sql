-- The outbox table the connector in outbox-connector.json reads (PostgreSQL).
-- The service inserts one row in the same database transaction as its business
-- write; Debezium turns each row into one record of hookrelay.events:
--   key     = aggregate_id             (the entity: its events are fanned out in order)
--   value   = payload                  (the whole CloudEvent, JSON, as bytes)
--   header  content-type = content_type ('application/cloudevents+json': structured mode)
CREATE TABLE outbox (
    id             uuid PRIMARY KEY,           -- Debezium's event id (dedup inside Connect)
    aggregate_type text  NOT NULL,             -- routes the row; every row here goes to hookrelay.events
    aggregate_id   text  NOT NULL,
    content_type   text  NOT NULL DEFAULT 'application/cloudevents+json',
    payload        bytea NOT NULL              -- the CloudEvent JSON, UTF-8 (bytea keeps the bytes exact)
);

-- In the business transaction:
-- BEGIN;
--   UPDATE invoices SET status = 'paid' WHERE id = 'in_1';
--   INSERT INTO outbox (id, aggregate_type, aggregate_id, payload) VALUES (
--     gen_random_uuid(), 'invoice', 'in_1', convert_to(
--       '{"specversion":"1.0","id":"evt_7f3c…","source":"/billing","type":"invoice.paid",'
--       '"time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","data":{"invoice":"in_1"}}', 'UTF8'));
-- COMMIT;
-- Delete outbox rows after a while (Debezium reads the WAL, not the table).
