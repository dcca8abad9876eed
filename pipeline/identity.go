package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/delivery"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

// Error classes of deliveries that are not sent because of their endpoint's
// status (the identity reasons are endpoints.Reason*: endpoint_deleted,
// endpoint_recreated, tenant_mismatch, subscription_changed).
const (
	classDisabled = "endpoint_disabled" // disabled by the operator (or by the pipeline for another reason)
	classGone     = "endpoint_gone"     // disabled by the pipeline after a 410
	classFailing  = "endpoint_failing"  // disabled by the pipeline after sustained failure
	classInvalid  = "invalid_endpoint"  // the endpoint record cannot be used (config_error)
)

// verdict says why a delivery is not sent: its outcome, error class and a
// message for the delivery log. The zero verdict means "send it".
type verdict struct {
	outcome audit.Outcome
	class   string
	message string
	// foreign: the endpoint is no longer the delivery's (deleted,
	// re-created, another tenant): nothing of it goes into the row.
	foreign bool
}

// statusVerdict is why an endpoint that is still the delivery's own is not
// sent to: invalid (config_error) or not active (skipped at fan-out,
// abandoned later, as given); the zero verdict when it is active.
func statusVerdict(ep *endpoints.Endpoint, inactive audit.Outcome) verdict {
	st, reason := ep.EffectiveStatus()
	switch st {
	case endpoints.Active:
		return verdict{}
	case endpoints.Invalid:
		return verdict{outcome: audit.ConfigError, class: classInvalid, message: "endpoint config cannot be used; not sent: " + reason}
	}
	class := classDisabled
	if ep.Status != endpoints.Disabled && ep.PipelineStatus != nil {
		switch ep.PipelineStatus.Reason {
		case endpoints.ReasonGone:
			class = classGone
		case endpoints.ReasonFailing:
			class = classFailing
		}
	}
	return verdict{outcome: inactive, class: class, message: fmt.Sprintf("endpoint disabled (%s); not sent", reason)}
}

// checkIdentity is the check made before every attempt of a delivery, on
// whatever path it came (first attempt, a retry back from a tier, a parked
// or held delivery): it is sent only to the endpoint it was fanned out for
// (endpoints.Endpoint.Mismatch: same incarnation, the event's tenant, a
// pattern matching its type), and only while that endpoint is usable and
// active. ep is nil when the ID is unknown. Changes that keep the identity
// (URL, secrets, pacing, timeouts) apply.
func checkIdentity(m *delivery.Meta, ep *endpoints.Endpoint) verdict {
	switch reason := ep.Mismatch(m.Incarnation, m.EventType, m.Tenant); reason {
	case "":
	case endpoints.ReasonEndpointDeleted:
		return verdict{outcome: audit.Abandoned, class: reason, message: "endpoint deleted; not sent", foreign: true}
	case endpoints.ReasonEndpointRecreated:
		return verdict{outcome: audit.Abandoned, class: reason, message: "endpoint deleted and re-created since the delivery was made (another incarnation); not sent", foreign: true}
	case endpoints.ReasonTenantMismatch:
		return verdict{outcome: audit.Abandoned, class: reason, message: "endpoint no longer belongs to the event's tenant; not sent", foreign: true}
	default:
		return verdict{outcome: audit.Abandoned, class: reason, message: "endpoint no longer subscribes to the event type; not sent"}
	}
	return statusVerdict(ep, audit.Abandoned)
}

// refuse ends a delivery the dispatcher does not send (see checkIdentity):
// one attempt row with the verdict and a DLQ record carrying it, so a later
// resend finds it.
func (d *Dispatcher) refuse(it *item, ep *endpoints.Endpoint, v verdict, now time.Time) []*kgo.Record {
	if v.foreign {
		ep = nil // the row is the event's tenant's: no trace of another endpoint
	}
	row := attemptRow(it, ep, v.outcome, now)
	row.AttemptID = newAttemptID()
	row.ErrorClass = v.class
	row.ErrorMessage = v.message
	d.m.attempts.Add(context.Background(), 1, attrOutcome(v.outcome))
	d.m.notSent.Add(context.Background(), 1, metric.WithAttributes(attribute.String("outcome", string(v.outcome)), attrReason(v.class)))
	d.o.Logger.Info("dispatch: delivery not sent", "endpoint", it.meta.EndpointID, "delivery", it.meta.DeliveryID,
		"event", it.meta.EventID, "outcome", v.outcome, "reason", v.class)
	m := it.meta
	m.Reason = string(v.outcome)
	m.History = append(m.History, delivery.AttemptSummary{Number: m.Attempt, At: now, Outcome: string(v.outcome), ErrorClass: v.class})
	// The row commits with the delivery's offset, like every outcome row.
	return append(d.attemptRecord(row), deliveryRecord(d.o.Topics.DLQ, it.key, it.value, &m))
}

// notSent is fan-out's record of a match it does not send (the endpoint is
// disabled or invalid): an attempt row on the attempts topic and the whole
// delivery record on the DLQ with the reason, both in fan-out's
// transaction, so no (event, endpoint) match disappears without a trace.
// The row's attempt ID is derived from the delivery ID and the endpoint's
// config version, so reading the event again writes the same row.
func (f *Fanout) notSent(ctx context.Context, ep *endpoints.Endpoint, m delivery.Meta, body []byte, v verdict, now time.Time) []*kgo.Record {
	at := now.UTC().Truncate(time.Millisecond)
	row := audit.Attempt{
		AttemptID:     notSentID(m.DeliveryID, ep.Version),
		DeliveryID:    m.DeliveryID,
		EventID:       m.EventID,
		WebhookID:     m.WebhookID,
		EventType:     m.EventType,
		Tenant:        m.Tenant,
		EndpointID:    ep.ID,
		AttemptNumber: m.Attempt,
		AttemptedAt:   at,
		Outcome:       v.outcome,
		ErrorClass:    v.class,
		ErrorMessage:  v.message,
	}
	if u, err := url.Parse(ep.URL); err == nil {
		row.URLHost = u.Host
	}
	b, err := f.o.AttemptFormat.Encode(&row)
	if err != nil { // plain fields, a checked format: cannot fail
		f.o.Logger.Error("fanout: encode attempt row", "err", err)
	}
	f.m.notSent.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(v.outcome)), attrReason(v.class)))
	f.m.attempts.Add(ctx, 1, attrOutcome(v.outcome))
	m.Reason = string(v.outcome)
	m.History = []delivery.AttemptSummary{{Number: m.Attempt, At: at, Outcome: string(v.outcome), ErrorClass: v.class}}
	return []*kgo.Record{
		{Topic: f.o.Topics.Attempts, Key: []byte(ep.ID), Value: b},
		deliveryRecord(f.o.Topics.DLQ, []byte(ep.ID), body, &m),
	}
}

func notSentID(deliveryID string, version int64) string {
	h := sha256.Sum256([]byte(deliveryID + "/not-sent/" + strconv.FormatInt(version, 10)))
	return hex.EncodeToString(h[:16])
}
