package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/operational"
)

// OperatorEvents publishes the operational events an operator's change of
// an endpoint causes (enabled, disabled, secret rotated) to
// Topics.Operational, for the endpoint's tenant to be notified like the
// pipeline's own health events (issue 11, "Endpoint health"). The CLI
// (`hookrelay endpoints enable/disable/update --secret`) and the REST API
// both publish through it, so the two agree on when an event is due and
// what it holds. Safe for concurrent use.
//
// Each method runs after the change is written (the endpoints topic and
// the operational topic share no transaction): an error means the change
// stands but its event was not published.
type OperatorEvents struct {
	cl    *kgo.Client
	topic Topics
	now   func() time.Time
}

// operatorPublishTimeout bounds one publish (the client retries within it).
const operatorPublishTimeout = 30 * time.Second

// NewOperatorEvents returns an OperatorEvents producing with cl (its
// owner closes it; an acks=all client, as every pipeline producer) to
// topics.Operational, which must be set. now is the events' clock; nil
// means time.Now.
func NewOperatorEvents(cl *kgo.Client, topics Topics, now func() time.Time) (*OperatorEvents, error) {
	if cl == nil {
		return nil, errors.New("pipeline: NewOperatorEvents: nil client")
	}
	if topics.Operational == "" {
		return nil, errors.New("pipeline: NewOperatorEvents: Topics.Operational is not set")
	}
	if now == nil {
		now = time.Now
	}
	return &OperatorEvents{cl: cl, topic: topics, now: now}, nil
}

// Enabled publishes hookrelay.endpoint.enabled (reason "operator") when
// the change from was to now enabled the endpoint: it was effectively
// disabled (by an operator or by the pipeline) and is active now. Any
// other change publishes nothing.
func (o *OperatorEvents) Enabled(ctx context.Context, was, now *endpoints.Endpoint) error {
	if st, _ := was.EffectiveStatus(); st != endpoints.Disabled || !now.Active() {
		return nil
	}
	return o.publish(ctx, operational.TypeEndpointEnabled, now, operational.Data{Reason: endpoints.ReasonOperator})
}

// Disabled publishes hookrelay.endpoint.disabled (reason "operator") when
// the change from was to now disabled an active endpoint; disabling one
// already disabled publishes nothing.
func (o *OperatorEvents) Disabled(ctx context.Context, was, now *endpoints.Endpoint) error {
	if !was.Active() || now.Active() {
		return nil
	}
	return o.publish(ctx, operational.TypeEndpointDisabled, now, operational.Data{Reason: endpoints.ReasonOperator})
}

// SecretRotated publishes hookrelay.endpoint.secret_rotated for e (after
// the rotation): oldExpireAt is when the secrets it replaced stop signing.
func (o *OperatorEvents) SecretRotated(ctx context.Context, e *endpoints.Endpoint, oldExpireAt time.Time) error {
	return o.publish(ctx, operational.TypeEndpointSecretRotated, e, operational.Data{OldSecretsExpireAt: &oldExpireAt})
}

// publish produces the event, awaited, within operatorPublishTimeout; it
// goes on when ctx is cancelled (the change it reports is already made).
func (o *OperatorEvents) publish(ctx context.Context, typ string, e *endpoints.Endpoint, d operational.Data) error {
	d.EndpointID = e.ID
	ev, err := operational.New(typ, e.TenantID, o.now(), d)
	if err != nil {
		return fmt.Errorf("pipeline: %s event of endpoint %s: %w", typ, e.ID, err)
	}
	r, err := OperationalRecord(o.topic, ev)
	if err != nil {
		return fmt.Errorf("pipeline: %s event of endpoint %s: %w", typ, e.ID, err)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), operatorPublishTimeout)
	defer cancel()
	if err := o.cl.ProduceSync(pctx, r).FirstErr(); err != nil {
		return fmt.Errorf("pipeline: publish %s event of endpoint %s: %w", typ, e.ID, err)
	}
	return nil
}
