package main

import (
	"bytes"
	"math"
	"slices"
	"time"
)

// Dist summarises a sample of durations: count, nearest-rank percentiles and
// extremes, in milliseconds (the unit of every latency figure the report
// prints). The zero Dist is an empty sample.
type Dist struct {
	N     int     `json:"n"`
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
	Below int     `json:"negative"` // samples below zero (retry precision: early requests)
}

// summarize returns the Dist of samples (nanoseconds). It sorts a copy; the
// input is left as it is.
func summarize(samples []int64) Dist {
	if len(samples) == 0 {
		return Dist{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum float64
	neg := 0
	for _, v := range s {
		sum += float64(v)
		if v < 0 {
			neg++
		}
	}
	return Dist{
		N:     len(s),
		Min:   ms(s[0]),
		P50:   ms(percentile(s, 50)),
		P90:   ms(percentile(s, 90)),
		P99:   ms(percentile(s, 99)),
		P999:  ms(percentile(s, 99.9)),
		Max:   ms(s[len(s)-1]),
		Mean:  round3(sum / float64(len(s)) / 1e6),
		Below: neg,
	}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value with at least p % of the sample at or below it.
// It returns 0 for an empty sample; p <= 0 gives the minimum.
func percentile(sorted []int64, p float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	// The epsilon absorbs float error: 99.9/100*1000 is 999.0000000000001.
	rank := int(math.Ceil(p/100*float64(n) - 1e-9))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// percentileMs is the nearest-rank percentile of unsorted samples (ns), in ms.
func percentileMs(samples []int64, p float64) float64 {
	s := slices.Clone(samples)
	slices.Sort(s)
	return ms(percentile(s, p))
}

func ms(ns int64) float64 { return round3(float64(ns) / 1e6) }

// round3 rounds to three decimals, so the JSON line stays readable.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// round1 rounds to one decimal.
func round1(f float64) float64 { return math.Round(f*10) / 10 }

// steadyWindow finds the steady-state part of a drain: given the completion
// instants of a run (unix nanoseconds, any order), it returns the window
// between the instants by which lo and hi (fractions, 0 <= lo < hi <= 1) of
// the completions had happened, the completions inside it, and their rate
// per second. Ramp-up (consumer joins, connection set-up) and the tail (the
// last endpoints draining alone) fall outside. ok is false when the sample
// is too small (fewer than 10 completions) or the window is empty.
func steadyWindow(done []int64, lo, hi float64) (w Window, ok bool) {
	if len(done) < 10 || lo < 0 || hi > 1 || lo >= hi {
		return Window{}, false
	}
	s := slices.Clone(done)
	slices.Sort(s)
	i := int(math.Floor(lo * float64(len(s)-1)))
	j := int(math.Ceil(hi * float64(len(s)-1)))
	if j <= i || s[j] <= s[i] {
		return Window{}, false
	}
	w = Window{Start: time.Unix(0, s[i]), End: time.Unix(0, s[j]), Count: j - i}
	return w, true
}

// Window is a measurement interval and how many completions fell in it.
type Window struct {
	Start, End time.Time
	Count      int
}

// Seconds is the window's length in seconds.
func (w Window) Seconds() float64 { return w.End.Sub(w.Start).Seconds() }

// Rate is completions per second over the window; 0 for an empty window.
func (w Window) Rate() float64 {
	if s := w.Seconds(); s > 0 {
		return float64(w.Count) / s
	}
	return 0
}

// countBetween returns how many instants (unix ns) lie in [from, to).
func countBetween(instants []int64, from, to time.Time) int {
	a, b := from.UnixNano(), to.UnixNano()
	n := 0
	for _, t := range instants {
		if t >= a && t < b {
			n++
		}
	}
	return n
}

// Sample is one reading of a process's counters.
type Sample struct {
	At     time.Time
	CPU    float64 // user+system CPU seconds since the process started
	RSSKiB int64   // resident set size
}

// valueAt interpolates a cumulative counter between the samples around t
// (which are in time order). Before the first sample it returns the first
// value, after the last the last value.
func valueAt(samples []Sample, t time.Time, get func(Sample) float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	if !t.After(samples[0].At) {
		return get(samples[0])
	}
	for k := 1; k < len(samples); k++ {
		if !t.After(samples[k].At) {
			a, b := samples[k-1], samples[k]
			span := b.At.Sub(a.At).Seconds()
			if span <= 0 {
				return get(b)
			}
			f := t.Sub(a.At).Seconds() / span
			return get(a) + f*(get(b)-get(a))
		}
	}
	return get(samples[len(samples)-1])
}

// cpuBetween is the CPU seconds a process used between from and to,
// interpolated from its samples.
func cpuBetween(samples []Sample, from, to time.Time) float64 {
	cpu := func(s Sample) float64 { return s.CPU }
	return valueAt(samples, to, cpu) - valueAt(samples, from, cpu)
}

// peakRSS is the largest RSS among samples taken in [from, to]; a zero from
// or to leaves that side open.
func peakRSS(samples []Sample, from, to time.Time) int64 {
	var peak int64
	for _, s := range samples {
		if (!from.IsZero() && s.At.Before(from)) || (!to.IsZero() && s.At.After(to)) {
			continue
		}
		peak = max(peak, s.RSSKiB)
	}
	return peak
}

// meanRSS is the mean RSS of the samples in [from, to]; 0 when none.
func meanRSS(samples []Sample, from, to time.Time) int64 {
	var sum, n int64
	for _, s := range samples {
		if s.At.Before(from) || s.At.After(to) {
			continue
		}
		sum += s.RSSKiB
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// crossing returns when a non-decreasing counter, sampled as (at, value)
// pairs in time order, first reached v, interpolating linearly between the
// two samples around the crossing. ok is false when it never did.
func crossing(at []time.Time, values []float64, v float64) (time.Time, bool) {
	for k := range values {
		if values[k] >= v {
			if k == 0 {
				return at[0], true
			}
			a, b := values[k-1], values[k]
			if b == a {
				return at[k], true
			}
			f := (v - a) / (b - a)
			return at[k-1].Add(time.Duration(f * float64(at[k].Sub(at[k-1])))), true
		}
	}
	return time.Time{}, false
}

// ratio is a/b rounded to three decimals, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

// parseProducedNs finds `"produced_ns":<digits>` in a webhook body and
// returns the number; ok is false when absent or malformed. The harness
// writes the field itself, so a byte search suffices and keeps the
// receivers cheap.
func parseProducedNs(body []byte) (int64, bool) {
	const key = `"produced_ns":`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return 0, false
	}
	var n int64
	digits := 0
	for _, c := range body[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		if digits == 19 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		digits++
	}
	return n, digits > 0
}

// per1000 is a process's CPU seconds in a window per 1,000 deliveries made
// in it (0 when none were).
func per1000(ps map[string]procFigures, name string, deliveries int) float64 {
	if deliveries <= 0 {
		return 0
	}
	return round3(ps[name].CPUSeconds / (float64(deliveries) / 1000))
}
