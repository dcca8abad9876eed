package pipeline

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/audit"
)

// KafkaAttemptLog streams attempt rows to the attempts topic with an
// idempotent, non-transactional producer: an attempt is recorded the moment
// it ends, whatever becomes of the transaction that retires its delivery
// (a real request always has its row). Safe for concurrent use.
type KafkaAttemptLog struct {
	cl     *kgo.Client
	topic  string
	logger *slog.Logger
}

// NewKafkaAttemptLog produces to topic with cl; the caller owns cl and must
// Flush it before closing so buffered rows are not lost.
func NewKafkaAttemptLog(cl *kgo.Client, topic string, logger *slog.Logger) *KafkaAttemptLog {
	if logger == nil {
		logger = slog.Default()
	}
	return &KafkaAttemptLog{cl: cl, topic: topic, logger: logger}
}

// Record produces a asynchronously, keyed by endpoint ID. The client retries
// until the record is written; a failure is logged. It blocks only while the
// client's buffer is full, until ctx ends (then the row is dropped and
// logged).
func (l *KafkaAttemptLog) Record(ctx context.Context, a *audit.Attempt) {
	b, err := a.Marshal()
	if err != nil {
		l.logger.Error("attempts: encode", "attempt_id", a.AttemptID, "err", err)
		return
	}
	l.cl.Produce(ctx, &kgo.Record{Topic: l.topic, Key: []byte(a.EndpointID), Value: b}, func(_ *kgo.Record, err error) {
		if err != nil {
			l.logger.Error("attempts: produce", "attempt_id", a.AttemptID, "err", err)
		}
	})
}
