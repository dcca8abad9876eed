package retrytiers

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Tier is one delay topic. A record appended to Topic is ready Delay after
// its append time (the topic uses message.timestamp.type=LogAppendTime, see
// [TierTopicConfig]), so readiness grows with offset and a FIFO consumer never
// waits behind a head that is due later than the records after it.
type Tier struct {
	Topic string
	Delay time.Duration
}

// Tiers is a set of tiers with distinct delays, sorted by ascending Delay, as
// built by [TiersFor]. Its methods never modify it.
type Tiers []Tier

// TiersFor returns one tier per distinct delay of s, sorted by ascending
// delay, named by [TierTopic]. The prefix is the topic prefix, e.g.
// "hookrelay."; it may be empty. It fails when s is invalid (see
// [Schedule.Validate]).
func TiersFor(prefix string, s Schedule) (Tiers, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	ds := slices.Clone(s)
	slices.Sort(ds)
	ds = slices.Compact(ds)
	t := make(Tiers, len(ds))
	for i, d := range ds {
		t[i] = Tier{Topic: TierTopic(prefix, d), Delay: d}
	}
	return t, nil
}

// TierTopic names the tier topic of delay d: prefix + "retry-" +
// [FormatDelay](d), e.g. "hookrelay.retry-30s", "hookrelay.retry-6h".
func TierTopic(prefix string, d time.Duration) string {
	return prefix + "retry-" + FormatDelay(d)
}

// FormatDelay formats d compactly for topic names and configuration: units
// h, m, s, ms (and us, ns for sub-millisecond parts), zero components
// omitted: 30s, 2m, 1h, 1m30s, 1h30m, 1s500ms. Zero is "0s". Unlike
// [time.Duration.String] it never prints "1h0m0s" or a decimal point, and
// its output parses back with [time.ParseDuration].
func FormatDelay(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d // math.MinInt64 cannot occur for a validated schedule
	}
	for _, u := range []struct {
		unit time.Duration
		name string
	}{
		{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"},
		{time.Millisecond, "ms"}, {time.Microsecond, "us"}, {time.Nanosecond, "ns"},
	} {
		if n := d / u.unit; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}

// Validate reports whether t is usable by a [Relay]: at least one tier,
// topics non-empty and distinct, delays positive and strictly ascending.
func (t Tiers) Validate() error {
	if len(t) == 0 {
		return errors.New("retrytiers: no tiers")
	}
	seen := make(map[string]bool, len(t))
	for i, tr := range t {
		switch {
		case tr.Topic == "":
			return fmt.Errorf("retrytiers: tier %d: empty topic", i+1)
		case seen[tr.Topic]:
			return fmt.Errorf("retrytiers: tier %d: duplicate topic %q", i+1, tr.Topic)
		case tr.Delay <= 0:
			return fmt.Errorf("retrytiers: tier %d (%s): delay must be positive", i+1, tr.Topic)
		case i > 0 && tr.Delay <= t[i-1].Delay:
			return fmt.Errorf("retrytiers: tier %d (%s): delays must be distinct and ascending", i+1, tr.Topic)
		}
		seen[tr.Topic] = true
	}
	return nil
}

// Next picks the hop for a record that must still wait remaining: the tier
// with the largest delay not above remaining. It returns false when
// remaining is below the smallest tier's delay (or t is empty): the record
// then goes back to the deliveries topic, and the dispatcher holds the rest
// (less than the smallest delay) locally before the attempt.
//
// Hopping greedily from large to small realises any delay (jitter,
// Retry-After) with fixed-delay tiers and never ends early, because every hop
// is at most the remaining wait. A wait of w takes w/Largest hops of the
// largest tier, then fewer than (next larger delay / delay) hops of each
// smaller tier: at most 12 hops for any wait under 6 h with the default
// tiers, usually 2–4.
func (t Tiers) Next(remaining time.Duration) (Tier, bool) {
	for i := len(t) - 1; i >= 0; i-- {
		if t[i].Delay <= remaining {
			return t[i], true
		}
	}
	return Tier{}, false
}

// Smallest is the smallest tier delay; 0 for no tiers.
func (t Tiers) Smallest() time.Duration {
	if len(t) == 0 {
		return 0
	}
	return t[0].Delay
}

// Largest is the largest tier delay; 0 for no tiers. Callers cap a
// Retry-After at it (it equals [Schedule.MaxDelay] for tiers built by
// [TiersFor]).
func (t Tiers) Largest() time.Duration {
	if len(t) == 0 {
		return 0
	}
	return t[len(t)-1].Delay
}

// Topics lists the tier topics in ascending delay order.
func (t Tiers) Topics() []string {
	ts := make([]string, len(t))
	for i, tr := range t {
		ts[i] = tr.Topic
	}
	return ts
}

// ByTopic finds the tier of topic.
func (t Tiers) ByTopic(topic string) (Tier, bool) {
	for _, tr := range t {
		if tr.Topic == topic {
			return tr, true
		}
	}
	return Tier{}, false
}

// TierRetention is the retention [TierTopicConfig] sets on tier topics:
// 7 days. It must exceed the longest tier delay plus the longest relay outage
// to be survived; with the default 6 h tiers that leaves days of margin.
const TierRetention = 7 * 24 * time.Hour

// TierTopicConfig returns the topic configuration every tier topic must be
// created with, for kadm.Client.CreateTopics:
//
//   - message.timestamp.type=LogAppendTime: the broker stamps each record
//     with its append time, which the relay adds the tier delay to; this
//     keeps readiness monotonic in offset order, so a paused FIFO partition
//     never waits behind a head due later than the records after it.
//   - cleanup.policy=delete, retention.ms=[TierRetention].
//
// Partition count, replication factor and min.insync.replicas are the
// caller's (the same as for the deliveries topic). A fresh map is returned
// on each call.
func TierTopicConfig() map[string]*string {
	str := func(s string) *string { return &s }
	return map[string]*string{
		"message.timestamp.type": str("LogAppendTime"),
		"cleanup.policy":         str("delete"),
		"retention.ms":           str(strconv.FormatInt(TierRetention.Milliseconds(), 10)),
	}
}
