-- The delivery log: one row per attempt (see audit.Attempt).
--
-- Runs unchanged on ClickHouse 18.16 and on current releases, so it uses none
-- of DateTime64, TTL, CODEC, Map, LowCardinality or skip indexes.
--
-- Engine: ReplacingMergeTree, because insert deduplication does not work on a
-- plain MergeTree in 18.16 and the audit sink retries whole batches. Rows with
-- equal ORDER BY keys in one partition collapse to one. The key ends with
-- attempt_id, and attempt_id determines every other key column (an attempt is
-- immutable: its endpoint and time are fixed when it is made), so two rows
-- collapse exactly when they carry the same attempt_id. Duplicates collapse in
-- background merges; until then readers collapse them themselves (FINAL, or
-- LIMIT 1 BY attempt_id), so they never see one.
--
-- Time: attempted_at is DateTime('UTC') (seconds) plus attempted_ms (the
-- millisecond within that second, 0..999), because 18.16 has no DateTime64.
-- next_attempt_at/next_attempt_ms likewise; 0 (1970-01-01) means none.
--
-- PARTITION BY day (UTC), so retention drops whole day partitions
-- (audit.ClickHouse.DropPartitionsBefore): 18.16 has no TTL.
-- ORDER BY serves the delivery log: one endpoint's attempts by time.
CREATE TABLE IF NOT EXISTS {db}.attempts
(
    attempt_id      String,
    delivery_id     String,
    event_id        String,
    webhook_id      String,
    event_type      String,
    tenant          String,
    endpoint_id     String,
    url_host        String,
    attempt_number  UInt16,
    attempted_at    DateTime('UTC'),
    attempted_ms    UInt16,
    latency_ms      UInt32,
    http_status     UInt16,
    outcome         String,
    error_class     String,
    error_message   String,
    response_body   String,
    next_attempt_at DateTime('UTC'),
    next_attempt_ms UInt16
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(attempted_at)
ORDER BY (endpoint_id, attempted_at, attempted_ms, attempt_id)
SETTINGS index_granularity = 8192
