package events

import "github.com/twmb/franz-go/pkg/kgo"

// Check reports whether fan-out accepts r as an event, with the rules of
// [Decode] (maxBytes as there: <= 0 means [DefaultMaxBytes]) plus the
// conversion of its data into the webhook body ([DataJSON]). A nil error
// means fan-out will not send r to `<prefix>events.invalid`; any other
// error is the [*InvalidError] fan-out would record there, with the same
// Reason.
//
// It exists for producers (package publish, their own tests): they check
// a record with the pipeline's own code before producing it, so a mistake
// surfaces in the producer, not as a record in the invalid topic. Check is
// safe for concurrent use and does not modify r.
func Check(r *kgo.Record, maxBytes int) error {
	ev, err := Decode(r, maxBytes)
	if err != nil {
		return err
	}
	_, err = DataJSON(ev)
	return err
}
