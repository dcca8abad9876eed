package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// record encodes ev as a record of the events topic, stamped with now as
// the event's time, in the content mode ev asks for (CloudEvents Kafka
// protocol binding):
//   - structured (§3.3): content-type application/cloudevents+json, the whole
//     event as JSON in the value, built and validated by the CloudEvents SDK;
//   - binary (§3.2): ce_specversion, ce_id, ce_source, ce_type, ce_time
//     headers, content-type application/json (the datacontenttype), the
//     payload as the value.
//
// The key is the event ID (any key will do: hookrelay keys its deliveries by
// endpoint).
func record(topic string, ev demoEvent, now time.Time) (*kgo.Record, error) {
	r := &kgo.Record{Topic: topic, Key: []byte(ev.ID)}
	if ev.Binary {
		r.Value = ev.Data
		r.Headers = []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte(cloudevents.VersionV1)},
			{Key: "ce_id", Value: []byte(ev.ID)},
			{Key: "ce_source", Value: []byte(ev.Source)},
			{Key: "ce_type", Value: []byte(ev.Type)},
			{Key: "ce_time", Value: []byte(now.UTC().Format(time.RFC3339Nano))},
			{Key: "content-type", Value: []byte(cloudevents.ApplicationJSON)},
		}
		return r, nil
	}
	e := cloudevents.NewEvent(cloudevents.VersionV1)
	e.SetID(ev.ID)
	e.SetSource(ev.Source)
	e.SetType(ev.Type)
	e.SetTime(now)
	if err := e.SetData(cloudevents.ApplicationJSON, []byte(ev.Data)); err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ID, err)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ID, err)
	}
	v, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ID, err)
	}
	r.Value = v
	r.Headers = []kgo.RecordHeader{{Key: "content-type", Value: []byte(cloudevents.ApplicationCloudEventsJSON)}}
	return r, nil
}

// publish produces every event to topic and returns once all are
// acknowledged, printing progress to out at most every 500 ms and at the
// end. The first produce error is returned.
func publish(ctx context.Context, cl *kgo.Client, topic string, evs []demoEvent, out io.Writer) error {
	var (
		mu       sync.Mutex
		firstErr error
		acked    int
		printed  time.Time
		wg       sync.WaitGroup
		start    = time.Now()
	)
	for _, ev := range evs {
		r, err := record(topic, ev, time.Now())
		if err != nil {
			return err
		}
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("produce %s to %s: %w", r.Key, topic, err)
				}
				return
			}
			acked++
			if acked == len(evs) || time.Since(printed) >= 500*time.Millisecond {
				printed = time.Now()
				fmt.Fprintf(out, "  published %4d/%d  (%s)\n", acked, len(evs), time.Since(start).Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	return firstErr
}
