package publish

import (
	"context"
	"io"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/twmb/franz-go/pkg/kgo"
)

// writeBinary encodes ev into r in binary content mode through the SDK's
// binding machinery (binding.ToMessage → binding.BinaryWriter), as the
// SDK's own Kafka bindings do: every attribute and extension a `ce_<name>`
// header holding its canonical string form (types.Format), the
// datacontenttype the `content-type` header (binding §3.2.1), the data the
// value (§3.2.2).
func writeBinary(ctx context.Context, ev *event.Event, r *kgo.Record) error {
	_, err := binding.Write(ctx, binding.ToMessage(ev), nil, (*binaryWriter)(r))
	return err
}

type binaryWriter kgo.Record

var _ binding.BinaryWriter = (*binaryWriter)(nil)

func (w *binaryWriter) Start(context.Context) error { return nil }
func (w *binaryWriter) End(context.Context) error   { return nil }

func (w *binaryWriter) SetData(data io.Reader) error {
	b, err := io.ReadAll(data)
	w.Value = b
	return err
}

func (w *binaryWriter) SetAttribute(a spec.Attribute, value any) error {
	if a.Kind() == spec.DataContentType {
		return w.set("content-type", value)
	}
	return w.set("ce_"+a.Name(), value)
}

func (w *binaryWriter) SetExtension(name string, value any) error {
	return w.set("ce_"+name, value)
}

func (w *binaryWriter) set(key string, value any) error {
	if value == nil {
		return nil
	}
	s, err := types.Format(value)
	if err != nil {
		return err
	}
	w.Headers = append(w.Headers, kgo.RecordHeader{Key: key, Value: []byte(s)})
	return nil
}
