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
	cl    *kgo.Client
	topic string
}

// NewKafkaAttemptLog produces to topic with cl, which must be an idempotent
// producer with acks=all (franz-go's defaults) and use the same partitioner
// as the dispatcher's client. Give it a short linger (or none): every
// Started waits for its record. The caller owns cl.
func NewKafkaAttemptLog(cl *kgo.Client, topic string) *KafkaAttemptLog {
	return &KafkaAttemptLog{cl: cl, topic: topic}
}

// Started produces a and waits until every in-sync replica has it. It
// returns the error that kept the record from being written (ctx ended,
// the client's record delivery timeout passed, the broker refused it);
// then the dispatcher makes no request.
func (l *KafkaAttemptLog) Started(ctx context.Context, a *audit.Attempt) error {
	b, err := a.Marshal()
	if err != nil {
		return fmt.Errorf("pipeline: encode attempt %s: %w", a.AttemptID, err)
	}
	if err := l.cl.ProduceSync(ctx, &kgo.Record{Topic: l.topic, Key: []byte(a.EndpointID), Value: b}).FirstErr(); err != nil {
		return fmt.Errorf("pipeline: write the sending row of attempt %s: %w", a.AttemptID, err)
	}
	return nil
}
