// Package retrytiers holds hookrelay's retry policy as data and the delay
// topics that realise it.
//
// # Schedule
//
// A [Schedule] lists the delays after each failed attempt; the default
// ([DefaultSchedule]) is 30s, 2m, 10m, 30m, 1h, 2h, 4h, 6h, 6h, 6h: 11
// attempts over about 25.7 h, each delay stretched upward only by up to
// +20 % ([Schedule.Delay] with [DefaultJitter] and a random draw the caller
// supplies). [ParseSchedule] reads the HOOKRELAY_RETRY_SCHEDULE form
// ("30s,2m,…"); cmd/ reads the variable.
//
// # Tiers and hops
//
// Each distinct delay d has a tier topic "<prefix>retry-<d>" ([TiersFor],
// [TierTopic]) created with [TierTopicConfig] (LogAppendTime). A record in a
// tier is ready exactly d after its append time, so readiness grows with
// offset and a paused partition never waits behind a head due later than
// the records after it. Any other wait (jitter, Retry-After, parking) is
// realised by hopping greedily from large tiers to small ([Tiers.Next]):
//
//	dispatcher ── failed, wait w ──► retry-Next(w) ──► … ──► deliveries
//	                                (relay: one Kafka transaction per hop)
//
// When less than the smallest tier is left, the record returns to the
// deliveries topic and the dispatcher holds the remainder locally before
// the attempt; so no attempt is ever made before the delivery's due time.
//
// A Retry-After wait (parsed at the HTTP edge, pipeline/webhook) is capped at
// [Tiers.Largest].
//
// # What lives elsewhere
//
// This package is vocabulary: it imports only the standard library. The
// machinery that realises the schedule lives in the pipeline: the retry relay
// (pipeline.Relay) consumes the tier topics and moves due records on, one
// Kafka transaction per batch of hops; the delivery record's header codec is
// pipeline/delivery; Retry-After parsing is pipeline/webhook.
package retrytiers
