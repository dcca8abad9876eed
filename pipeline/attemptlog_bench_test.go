package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/e2e/stack"
)

// BenchmarkKafkaAttemptLogStarted measures what the Sending row adds to
// each attempt on the real broker: one awaited, acks=all produce, with the
// client run.go builds (no linger), alone and with concurrent attempts
// (franz-go batches rows produced while a request is in flight).
//
//	go test -run '^$' -bench KafkaAttemptLogStarted ./pipeline
func BenchmarkKafkaAttemptLogStarted(b *testing.B) {
	topic := stack.TopicPrefix(b) + "attempts"
	if _, err := kadm.NewClient(stack.Client(b)).CreateTopic(context.Background(), 12, -1, nil, topic); err != nil {
		b.Fatal(err)
	}
	cl := stack.Client(b, kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(10*time.Second))
	l := NewKafkaAttemptLog(cl, topic, AttemptBinary)
	for _, par := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("concurrent=%d", par), func(b *testing.B) {
			b.SetParallelism(par) // × GOMAXPROCS goroutines
			var mu sync.Mutex
			var lat []time.Duration
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				var mine []time.Duration
				defer func() { mu.Lock(); lat = append(lat, mine...); mu.Unlock() }()
				for pb.Next() {
					start := time.Now()
					i++
					a := &audit.Attempt{AttemptID: newAttemptID(), DeliveryID: "d", EndpointID: fmt.Sprint("ep-", i%100),
						AttemptedAt: time.Now().UTC(), Outcome: audit.Sending, AttemptNumber: 1}
					if err := l.Started(context.Background(), a); err != nil { // one row per write: the worst case
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
			})
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}
