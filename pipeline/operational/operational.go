// Package operational is the format of hookrelay's operational events: the
// CloudEvents hookrelay itself publishes about an endpoint's health and
// lifecycle (failing, disabled, enabled, recovered, secret rotated) on
// `<prefix>operational`. Fan-out reads that topic like the events topic, so
// these events reach, as signed webhooks through the same pipeline, every
// endpoint of the same tenant that subscribes to their types by name
// (issue 11, "Endpoint health"; seed "Reliable Webhook Delivery with a Job
// Queue", step 5: "disable it … and email the account owner").
//
// Standard library only: anything (the dispatcher, the REST API, the CLI)
// may build one without pulling in a client.
package operational

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Event types. An endpoint receives them only when one of its event-type
// patterns names them (e.g. "hookrelay.endpoint.*" or an exact type): the
// catch-all "*" does not select operational events, so existing endpoints
// do not start receiving them unasked.
const (
	// TypePrefix starts every operational event type.
	TypePrefix = "hookrelay."
	// TypeEndpointFailing: the endpoint's first failed attempt after a
	// success (Data.FailingSince is then that attempt's time), and again
	// when the failure has lasted each configured fraction of the disable
	// window (Data.WindowFraction).
	TypeEndpointFailing = "hookrelay.endpoint.failing"
	// TypeEndpointDisabled: the endpoint was disabled, by the pipeline
	// (Reason "failing" after the disable window of continuous failure,
	// "gone" after a 410) or by an operator.
	TypeEndpointDisabled = "hookrelay.endpoint.disabled"
	// TypeEndpointEnabled: an operator enabled the endpoint again.
	TypeEndpointEnabled = "hookrelay.endpoint.enabled"
	// TypeEndpointRecovered: the first successful attempt after the
	// endpoint had been failing (Data.FailingSince is when it started).
	TypeEndpointRecovered = "hookrelay.endpoint.recovered"
	// TypeEndpointSecretRotated: a new signing secret was added; the old
	// ones keep signing until Data.OldSecretsExpireAt.
	TypeEndpointSecretRotated = "hookrelay.endpoint.secret_rotated"
)

// ContentType is the Kafka content-type header value of an operational
// record: structured-mode CloudEvents JSON (CloudEvents Kafka binding,
// section 3.2).
const ContentType = "application/cloudevents+json"

// Data is the event's data (JSON). Fields that do not apply are omitted.
type Data struct {
	// EndpointID is the endpoint the event is about. Required.
	EndpointID string `json:"endpoint_id"`
	// FailingSince is the time of the first failed attempt of the current
	// failure (failing, disabled with reason failing, recovered).
	FailingSince *time.Time `json:"failing_since,omitempty"`
	// Reason is a short code: "failing", "gone", "operator" for disabled;
	// the last attempt's error class (e.g. "http_500", "timeout") for
	// failing; "operator" for enabled.
	Reason string `json:"reason,omitempty"`
	// Detail is for people, e.g. "500 from hooks.example.com".
	Detail string `json:"detail,omitempty"`
	// DisableAt is when the endpoint will be disabled if every attempt
	// until then fails (failing events).
	DisableAt *time.Time `json:"disable_at,omitempty"`
	// WindowFraction is the part of the disable window the failure has
	// lasted when a repeated failing event was sent (e.g. 0.5); 0 for the
	// first one.
	WindowFraction float64 `json:"window_fraction,omitempty"`
	// OldSecretsExpireAt is when the secrets replaced by a rotation stop
	// signing (secret rotated).
	OldSecretsExpireAt *time.Time `json:"old_secrets_expire_at,omitempty"`
}

// Event is one operational CloudEvent. Build it with [New].
type Event struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	// TenantID is the endpoint's tenant (the tenantid extension), omitted
	// for an endpoint without one: the event is scoped like any other, so
	// only the same tenant's endpoints can receive it.
	TenantID string `json:"tenantid,omitempty"`
	Data     Data   `json:"data"`
}

// New returns the event of type typ about the endpoint endpointID of
// tenant ("" for none) at the instant at. Its id is derived from the
// endpoint, type, time and data, so the same transition built twice (a
// retried transaction) has the same id, and so the same webhook-id.
// Source is "/hookrelay/endpoints/<endpoint ID>" and subject the endpoint
// ID: fan-out uses the subject to keep the event from the endpoint it is
// about.
func New(typ, tenant string, at time.Time, d Data) (Event, error) {
	switch {
	case !strings.HasPrefix(typ, TypePrefix):
		return Event{}, errors.New("operational: type must start with " + TypePrefix)
	case d.EndpointID == "":
		return Event{}, errors.New("operational: Data.EndpointID is required")
	case at.IsZero():
		return Event{}, errors.New("operational: time is required")
	}
	at = at.UTC().Truncate(time.Millisecond)
	d.FailingSince = utc(d.FailingSince)
	d.DisableAt = utc(d.DisableAt)
	d.OldSecretsExpireAt = utc(d.OldSecretsExpireAt)
	ev := Event{
		SpecVersion: "1.0", Source: "/hookrelay/endpoints/" + d.EndpointID, Type: typ, Subject: d.EndpointID,
		Time: at, DataContentType: "application/json", TenantID: tenant, Data: d,
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return Event{}, err
	}
	h := sha256.Sum256(b)
	ev.ID = "op_" + hex.EncodeToString(h[:16])
	return ev, nil
}

// Key is the Kafka record key: the endpoint ID, so one endpoint's events
// stay in order.
func (e Event) Key() []byte { return []byte(e.Data.EndpointID) }

// Value is the structured-mode CloudEvents JSON of e.
func (e Event) Value() ([]byte, error) { return json.Marshal(e) }

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Millisecond)
	return &u
}
