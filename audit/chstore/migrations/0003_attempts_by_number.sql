-- first_attempt_at/first_attempt_ms: when the delivery's attempt 1 was made
-- (audit.Attempt.FirstAttemptAt, set by the dispatcher from the delivery's
-- metadata); 0 on rows written before this migration and on fan-out's
-- not-sent rows. ADD COLUMN keeps old parts readable (they read 0).
ALTER TABLE {db}.attempts ADD COLUMN first_attempt_at DateTime('UTC')
;

ALTER TABLE {db}.attempts ADD COLUMN first_attempt_ms UInt16
;

-- attempts_by_number: per tenant, endpoint, UTC hour, attempt number and
-- outcome, the deliveries (countState of rows: a delivery makes one attempt per
-- number, and the sink inserts each row once, see 0002) and, for the time from a delivery's first attempt to
-- this attempt, quantilesTDigest states in ms (approximate; read them on
-- outcome = 'delivered' rows for time to success). Rows without
-- first_attempt_at add nothing to the time states.
CREATE TABLE IF NOT EXISTS {db}.attempts_by_number
(
    tenant         String,
    endpoint_id    String,
    hour           DateTime('UTC'),
    attempt_number UInt16,
    outcome        String,
    deliveries     AggregateFunction(count),
    since_first_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMMDD(hour)
ORDER BY (endpoint_id, hour, tenant, attempt_number, outcome)
SETTINGS index_granularity = 1024
;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.attempts_by_number_mv TO {db}.attempts_by_number
AS SELECT
    tenant,
    endpoint_id,
    toStartOfHour(attempted_at) AS hour,
    attempt_number,
    outcome,
    countState() AS deliveries,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(
        toUInt64(greatest((toUInt64(attempted_at) * 1000 + attempted_ms) - (toUInt64(first_attempt_at) * 1000 + first_attempt_ms), 0)),
        toUInt8(first_attempt_at > 0 AND attempted_at >= first_attempt_at)) AS since_first_ms
FROM {db}.attempts
GROUP BY tenant, endpoint_id, hour, attempt_number, outcome
;

-- Rows stored before this migration (their first_attempt_at is 0).
INSERT INTO {db}.attempts_by_number
SELECT
    tenant,
    endpoint_id,
    toStartOfHour(attempted_at) AS hour,
    attempt_number,
    outcome,
    countState() AS deliveries,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(toUInt64(0), toUInt8(0)) AS since_first_ms
FROM {db}.attempts FINAL
GROUP BY tenant, endpoint_id, hour, attempt_number, outcome
