package endpoints

import (
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := since.Add(time.Hour)
	for _, tt := range []struct {
		name    string
		ps      *Status
		status  State
		want    HealthState
		reason  string
		running bool
	}{
		{"no record", nil, Active, HealthActive, "", false},
		{"failing", &Status{State: Active, At: at, FailingSince: &since}, Active, HealthFailing, "", true},
		{"recovered", &Status{State: Active, At: at}, Active, HealthActive, "", false},
		{"disabled failing", &Status{State: Disabled, Reason: ReasonFailing, At: at, ConfigVersion: 5, FailingSince: &since}, Active, HealthDisabled, ReasonFailing, true},
		{"disabled failing, then enabled (version 6)", &Status{State: Disabled, Reason: ReasonFailing, At: at, ConfigVersion: 4, FailingSince: &since}, Active, HealthActive, "", false},
		{"operator disabled while failing", &Status{State: Active, At: at, FailingSince: &since}, Disabled, HealthDisabled, ReasonOperator, true},
	} {
		e := &Endpoint{ID: "a", Status: tt.status, Version: 5, PipelineStatus: tt.ps}
		if tt.name == "disabled failing, then enabled (version 6)" {
			e.Version = 6
		}
		got, reason, fs := e.Health()
		if got != tt.want || reason != tt.reason || (fs != nil) != tt.running {
			t.Errorf("%s: %s %q %v; want %s %q running=%v", tt.name, got, reason, fs, tt.want, tt.reason, tt.running)
		}
	}
}
