-- attempts_minute: per tenant, endpoint and UTC minute, the attempts by
-- outcome and HTTP status, kept on insert by the materialized view
-- attempts_minute_mv (docs/ANALYTICS.md describes every column).
--
-- Runs unchanged on 18.16 and current releases (no SimpleAggregateFunction,
-- TTL, LowCardinality).
--
-- Duplicates: a materialized view sees every INSERT into attempts, before
-- ReplacingMergeTree collapses anything, so the counts here are plain row
-- counts (countState): exact because the audit sink inserts each row once
-- (audit.Unstored: a retried or re-read batch inserts only the rows not yet
-- stored). A writer that inserts the same row twice counts it twice. An
-- attempt whose Interrupted row is later followed by its outcome shows
-- under both outcomes here.
--
-- Latency: quantilesTiming (exact to the ms up to 30,000 ms; larger values
-- count as 30,000) at levels 0.5, 0.9, 0.99.
CREATE TABLE IF NOT EXISTS {db}.attempts_minute
(
    tenant          String,
    endpoint_id     String,
    minute          DateTime('UTC'),
    outcome         String,
    http_status     UInt16,
    status_class    UInt8,
    attempts        AggregateFunction(count),
    latency         AggregateFunction(quantilesTiming(0.5, 0.9, 0.99), UInt32),
    last_attempt_at AggregateFunction(max, DateTime('UTC'))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(minute)
ORDER BY (endpoint_id, minute, tenant, outcome, http_status, status_class)
SETTINGS index_granularity = 1024
;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.attempts_minute_mv TO {db}.attempts_minute
AS SELECT
    tenant,
    endpoint_id,
    toStartOfMinute(attempted_at) AS minute,
    outcome,
    http_status,
    toUInt8(intDiv(http_status, 100)) AS status_class,
    countState() AS attempts,
    quantilesTimingState(0.5, 0.9, 0.99)(latency_ms) AS latency,
    maxState(attempted_at) AS last_attempt_at
FROM {db}.attempts
GROUP BY tenant, endpoint_id, minute, outcome, http_status, status_class
;

-- Rows stored before this migration, collapsed (FINAL).
INSERT INTO {db}.attempts_minute
SELECT
    tenant,
    endpoint_id,
    toStartOfMinute(attempted_at) AS minute,
    outcome,
    http_status,
    toUInt8(intDiv(http_status, 100)) AS status_class,
    countState() AS attempts,
    quantilesTimingState(0.5, 0.9, 0.99)(latency_ms) AS latency,
    maxState(attempted_at) AS last_attempt_at
FROM {db}.attempts FINAL
GROUP BY tenant, endpoint_id, minute, outcome, http_status, status_class
