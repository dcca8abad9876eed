package events

import (
	"errors"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/delivery"
)

// Headers that [InvalidRecord] adds to a record of the invalid topic.
const (
	// HeaderReason is the reason code, one of [Reasons]; the same key as a
	// DLQ record's reason (delivery.HeaderReason).
	HeaderReason = delivery.HeaderReason
	// HeaderReasonDetail is [InvalidError.Detail] (at most MaxDetailBytes).
	HeaderReasonDetail = "hookrelay-reason-detail"
	// HeaderOriginalTopic, HeaderOriginalPartition and HeaderOriginalOffset
	// locate the original record; partition and offset are decimal.
	HeaderOriginalTopic     = "hookrelay-original-topic"
	HeaderOriginalPartition = "hookrelay-original-partition"
	HeaderOriginalOffset    = "hookrelay-original-offset"
)

// MaxDetailBytes bounds the [HeaderReasonDetail] header.
const MaxDetailBytes = 1024

// InvalidRecord returns the record to produce to topic (the
// `<prefix>events.invalid` topic) for r, which failed with err. It keeps r's
// key, value, headers and timestamp; any headers of r with the names above
// are dropped (a record that was already invalid once), and then the reason
// headers are appended: [HeaderReason] (err's Reason, or [ReasonUnknown]
// when err is not an [*InvalidError]), [HeaderReasonDetail], and the
// original topic, partition and offset. r is not modified; the new record
// shares r's key and value bytes.
func InvalidRecord(r *kgo.Record, topic string, err error) *kgo.Record {
	reason, detail := ReasonUnknown, ""
	var ie *InvalidError
	switch {
	case errors.As(err, &ie):
		reason, detail = ie.Reason, ie.Detail
	case err != nil:
		detail = err.Error()
	}
	detail = truncate(strings.ToValidUTF8(detail, "\uFFFD"), MaxDetailBytes)

	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+5)
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderReason, HeaderReasonDetail, HeaderOriginalTopic, HeaderOriginalPartition, HeaderOriginalOffset:
			continue
		}
		hs = append(hs, h)
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderReasonDetail, Value: []byte(detail)},
		kgo.RecordHeader{Key: HeaderOriginalTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderOriginalPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOriginalOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
	)
	return &kgo.Record{
		Topic:     topic,
		Key:       r.Key,
		Value:     r.Value,
		Headers:   hs,
		Timestamp: r.Timestamp,
	}
}
