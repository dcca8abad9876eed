-- attempt_ids: an index of the delivery log by the ids it is searched by
-- (id_kind 1 event_id, 2 webhook_id, 3 delivery_id), kept on insert by
-- attempt_ids_mv. Log with an EventID, WebhookID or DeliveryID filter reads
-- the seconds the id's attempts were made at here first, then only those
-- seconds of the endpoint's key range in attempts (instead of every day
-- partition of the endpoint). ReplacingMergeTree: a repeated insert
-- collapses like the attempts table's; readers only take DISTINCT times.
CREATE TABLE IF NOT EXISTS {db}.attempt_ids
(
    endpoint_id  String,
    id_kind      UInt8,
    id           String,
    attempted_at DateTime('UTC'),
    attempt_id   String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(attempted_at)
ORDER BY (endpoint_id, id_kind, id, attempted_at, attempt_id)
SETTINGS index_granularity = 8192
;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.attempt_ids_mv TO {db}.attempt_ids
AS SELECT endpoint_id, k.1 AS id_kind, k.2 AS id, attempted_at, attempt_id
FROM {db}.attempts
ARRAY JOIN [(toUInt8(1), event_id), (toUInt8(2), webhook_id), (toUInt8(3), delivery_id)] AS k
;

-- Rows stored before this migration.
INSERT INTO {db}.attempt_ids
SELECT endpoint_id, k.1 AS id_kind, k.2 AS id, attempted_at, attempt_id
FROM {db}.attempts
ARRAY JOIN [(toUInt8(1), event_id), (toUInt8(2), webhook_id), (toUInt8(3), delivery_id)] AS k
