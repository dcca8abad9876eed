package pipeline

import (
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/operational"
)

// fanoutTopics are the topics fan-out reads: the events topic and, when
// named, the operational topic, whose records take the same decode and
// match path (see operationalTargets).
func fanoutTopics(t Topics) []string {
	if t.Operational == "" {
		return []string{t.Events}
	}
	return []string{t.Events, t.Operational}
}

// operationalTargets narrows the endpoints subscribed to an event read from
// the operational topic (eps is the view's shared slice, never modified):
// the endpoint the event is about (its subject) never receives it, however
// it subscribes, and only patterns that name operational types select one
// ("hookrelay.endpoint.*", an exact type; not the catch-all "*"), so
// endpoints opt in. Tenant scoping is the ordinary match: the event's
// tenantid is the endpoint's tenant. Events of the events topic pass
// unchanged.
func (f *Fanout) operationalTargets(r *kgo.Record, ev *event.Event, eps []*endpoints.Endpoint) []*endpoints.Endpoint {
	if r.Topic != f.o.Topics.Operational || f.o.Topics.Operational == "" {
		return eps
	}
	out := make([]*endpoints.Endpoint, 0, len(eps))
	for _, ep := range eps {
		if ep.ID == ev.Subject() || !namesOperational(ep.EventTypes, ev.Type()) {
			continue
		}
		out = append(out, ep)
	}
	return out
}

// namesOperational reports whether a pattern other than "*" selects typ
// (an operational type: it starts with operational.TypePrefix).
func namesOperational(patterns []string, typ string) bool {
	if !strings.HasPrefix(typ, operational.TypePrefix) {
		return false
	}
	for _, p := range patterns {
		if p != endpoints.WildcardAll && endpoints.MatchesType([]string{p}, typ) {
			return true
		}
	}
	return false
}
