package retrytiers_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hookrelay/hookrelay/retrytiers"
)

// The wait after a failed attempt, jittered upward with the caller's random
// source.
func ExampleSchedule_Delay() {
	s := retrytiers.DefaultSchedule()
	rng := rand.New(rand.NewPCG(1, 2)) // the caller's source; seeded here for the example
	for failed := 1; failed <= s.MaxAttempts(); failed++ {
		d, ok := s.Delay(failed, retrytiers.DefaultJitter, rng.Float64())
		if !ok {
			fmt.Printf("after attempt %d: give up (DLQ, exhausted)\n", failed)
			break
		}
		if failed <= 2 {
			fmt.Printf("after attempt %d: base %v, within [%v, %v): %v\n", failed, s[failed-1], s[failed-1],
				time.Duration(float64(s[failed-1])*1.2), d >= s[failed-1] && float64(d) < float64(s[failed-1])*1.2)
		}
	}
	// Output:
	// after attempt 1: base 30s, within [30s, 36s): true
	// after attempt 2: base 2m0s, within [2m0s, 2m24s): true
	// after attempt 11: give up (DLQ, exhausted)
}

// The greedy hop plan of a wait of 7h12m5s (attempt 8's 6h with +20 %
// jitter, plus 5s).
func ExampleTiers_Next() {
	tiers, err := retrytiers.TiersFor("hookrelay.", retrytiers.DefaultSchedule())
	if err != nil {
		panic(err)
	}
	wait := 7*time.Hour + 12*time.Minute + 5*time.Second
	for {
		t, ok := tiers.Next(wait)
		if !ok {
			fmt.Println("deliveries; the dispatcher holds", wait)
			break
		}
		fmt.Println(t.Topic)
		wait -= t.Delay
	}
	// Output:
	// hookrelay.retry-6h
	// hookrelay.retry-1h
	// hookrelay.retry-10m
	// hookrelay.retry-2m
	// deliveries; the dispatcher holds 5s
}

func ExampleParseSchedule() {
	s, err := retrytiers.ParseSchedule("1s, 2s, 4s, 4s")
	if err != nil {
		panic(err)
	}
	tiers, _ := retrytiers.TiersFor("t.", s)
	fmt.Println(s.MaxAttempts(), s.Total(), tiers.Topics())
	_, err = retrytiers.ParseSchedule("30s,2m,ten minutes")
	fmt.Println(err)
	// Output:
	// 5 11s [t.retry-1s t.retry-2s t.retry-4s]
	// retrytiers: schedule element 3 "ten minutes": time: invalid duration "ten minutes"
}
