package endpoints

import "time"

// HealthState is an endpoint's health as shown to people (the REST API's
// GET /v1/endpoints/{id}/health, `hookrelay endpoints get`).
type HealthState string

// The health states.
const (
	HealthActive   HealthState = "active"   // delivering; no failure since the last success
	HealthFailing  HealthState = "failing"  // active, but every attempt since FailingSince failed
	HealthDisabled HealthState = "disabled" // nothing is sent (operator, pipeline, or an invalid record)
)

// Health returns the endpoint's health, the reason when disabled (as
// EffectiveStatus gives it: "failing", "gone", the operator's reason, or
// the config problems), and the failing-since clock (nil when it is not
// running). The clock of a pipeline status record applies only while that
// record does: a disable superseded by a later config write (an enable) no
// longer counts, and neither does its FailingSince, exactly as the
// dispatcher rebuilds its state (pipeline/health.go).
func (e *Endpoint) Health() (state HealthState, reason string, failingSince *time.Time) {
	st, why := e.EffectiveStatus()
	if ps := e.PipelineStatus; ps != nil && ps.FailingSince != nil && (ps.State == Active || ps.ConfigVersion >= e.Version) {
		t := *ps.FailingSince
		failingSince = &t
	}
	switch {
	case st != Active:
		return HealthDisabled, why, failingSince
	case failingSince != nil:
		return HealthFailing, "", failingSince
	}
	return HealthActive, "", nil
}
