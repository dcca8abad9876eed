-- attempts_hour: attempts_minute per UTC hour (same columns, hour for
-- minute), kept on insert by attempts_hour_mv, so reads over many endpoints
-- and hours (the endpoints list's 24 h totals) merge 60 times fewer states.
-- Duplicates behave exactly as in attempts_minute (0002).
CREATE TABLE IF NOT EXISTS {db}.attempts_hour
(
    tenant          String,
    endpoint_id     String,
    hour            DateTime('UTC'),
    outcome         String,
    http_status     UInt16,
    status_class    UInt8,
    attempts        AggregateFunction(count),
    latency         AggregateFunction(quantilesTiming(0.5, 0.9, 0.99), UInt32),
    last_attempt_at AggregateFunction(max, DateTime('UTC'))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(hour)
ORDER BY (endpoint_id, hour, tenant, outcome, http_status, status_class)
SETTINGS index_granularity = 1024
;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.attempts_hour_mv TO {db}.attempts_hour
AS SELECT
    tenant,
    endpoint_id,
    toStartOfHour(attempted_at) AS hour,
    outcome,
    http_status,
    toUInt8(intDiv(http_status, 100)) AS status_class,
    countState() AS attempts,
    quantilesTimingState(0.5, 0.9, 0.99)(latency_ms) AS latency,
    maxState(attempted_at) AS last_attempt_at
FROM {db}.attempts
GROUP BY tenant, endpoint_id, hour, outcome, http_status, status_class
;

-- Rows stored before this migration, collapsed (FINAL).
INSERT INTO {db}.attempts_hour
SELECT
    tenant,
    endpoint_id,
    toStartOfHour(attempted_at) AS hour,
    outcome,
    http_status,
    toUInt8(intDiv(http_status, 100)) AS status_class,
    countState() AS attempts,
    quantilesTimingState(0.5, 0.9, 0.99)(latency_ms) AS latency,
    maxState(attempted_at) AS last_attempt_at
FROM {db}.attempts FINAL
GROUP BY tenant, endpoint_id, hour, outcome, http_status, status_class
