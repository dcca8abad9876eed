package pipeline

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
)

// KafkaAttemptLog writes the "sending" row of each attempt
// ([audit.Sending]) to the attempts topic, keyed by endpoint ID, before the
// request leaves. The attempt's outcome row is not written here: the
// dispatcher produces it in the transaction that retires the delivery, with
// the same key, so both rows land on the same partition in that order and
// the audit sink can pair them (see audit/sink). Safe for concurrent use.
type KafkaAttemptLog struct {
	cl     *kgo.Client
	topic  string
	format AttemptFormat
}

// NewKafkaAttemptLog produces to topic with cl, which must be an idempotent
// producer with acks=all (franz-go's defaults) and use the same partitioner
// as the dispatcher's client. Give it a short linger (or none): every
// Started waits for its record. Rows are encoded in format (""/json: the
// JSON form every release reads; binary: see [AttemptFormat]). The caller
// owns cl.
func NewKafkaAttemptLog(cl *kgo.Client, topic string, format AttemptFormat) *KafkaAttemptLog {
	return &KafkaAttemptLog{cl: cl, topic: topic, format: format}
}

// Started produces rows together (one produce, one wait: rows of one
// endpoint share a partition, so they travel in one batch) and waits until
// every in-sync replica has each. It returns the first error that kept a
// record from being written (ctx ended, the client's record delivery timeout
// passed, the broker refused it); then the dispatcher makes none of their
// requests.
func (l *KafkaAttemptLog) Started(ctx context.Context, rows ...*audit.Attempt) error {
	recs := make([]*kgo.Record, len(rows))
	for i, a := range rows {
		b, err := l.format.Encode(a)
		if err != nil {
			return fmt.Errorf("pipeline: encode attempt %s: %w", a.AttemptID, err)
		}
		recs[i] = &kgo.Record{Topic: l.topic, Key: []byte(a.EndpointID), Value: b}
	}
	if err := l.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("pipeline: write the sending rows of %d attempts (first %s): %w", len(rows), rows[0].AttemptID, err)
	}
	return nil
}
