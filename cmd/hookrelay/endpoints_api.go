package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// rotateSecretCmd is `hookrelay endpoints rotate-secret ID [--overlap 24h]`:
// POST /v1/endpoints/{id}/secret/rotate, which generates the new secret,
// keeps the current ones signing for the overlap and publishes
// hookrelay.endpoint.secret_rotated. The new secret is printed once.
func rotateSecretCmd() *cobra.Command {
	var overlap time.Duration
	cmd := &cobra.Command{
		Use:   "rotate-secret ID [--overlap 24h]",
		Short: "Give an endpoint a new generated secret (printed once); the current ones keep signing for --overlap (through the management API)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if overlap < 0 {
				return fmt.Errorf("invalid --overlap: must not be negative, got %s (0 retires the current secrets at once)", overlap)
			}
			return withAPI(cmd, func(ctx context.Context, c *apiClient) error {
				var res struct {
					Endpoint         json.RawMessage `json:"endpoint"`
					Secret           string          `json:"secret"`
					PreviousExpireAt *time.Time      `json:"previous_expire_at"`
				}
				if err := c.call(ctx, "POST", "/v1/endpoints/"+url.PathEscape(args[0])+"/secret/rotate", nil,
					map[string]string{"overlap": overlap.String()}, &res); err != nil {
					return err
				}
				fmt.Printf("secret: %s\n(shown once: store it now; the previous secrets keep signing until %s)\n", res.Secret, whenText(res.PreviousExpireAt, "now"))
				var e any
				if err := json.Unmarshal(res.Endpoint, &e); err != nil {
					return err
				}
				return printJSON(os.Stdout, e)
			})
		},
	}
	cmd.Flags().DurationVar(&overlap, "overlap", 24*time.Hour, "how long the current secrets keep signing beside the new one")
	return cmd
}

// endpointHealth is GET /v1/endpoints/{id}/health (schema Health).
type endpointHealth struct {
	EndpointID    string       `json:"endpoint_id"`
	Status        string       `json:"status"`
	Reason        string       `json:"reason"`
	FailingSince  *time.Time   `json:"failing_since"`
	LastSuccessAt *time.Time   `json:"last_success_at"`
	LastAttemptAt *time.Time   `json:"last_attempt_at"`
	LastHour      healthCounts `json:"last_hour"`
	LastDay       healthCounts `json:"last_day"`
}

type healthCounts struct {
	Attempts    int64    `json:"attempts"`
	Delivered   int64    `json:"delivered"`
	Failed      int64    `json:"failed"`
	SuccessRate *float64 `json:"success_rate"`
}

func (c healthCounts) String() string {
	rate := "no attempts"
	if c.SuccessRate != nil {
		rate = fmt.Sprintf("%.1f%% success", *c.SuccessRate*100)
	}
	return fmt.Sprintf("%s (%d delivered, %d failed, %d attempts)", rate, c.Delivered, c.Failed, c.Attempts)
}

// healthCmd is `hookrelay endpoints health ID`: GET
// /v1/endpoints/{id}/health, printed for people.
func healthCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "health ID",
		Short: "Show an endpoint's health: status and why, failing since, last success, success rate over 1 h and 1 d (through the management API)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAPI(cmd, func(ctx context.Context, c *apiClient) error {
				var h endpointHealth
				if err := c.call(ctx, "GET", "/v1/endpoints/"+url.PathEscape(args[0])+"/health", nil, nil, &h); err != nil {
					return err
				}
				return printHealth(os.Stdout, h)
			})
		},
	}
}

func printHealth(w io.Writer, h endpointHealth) error {
	status := h.Status
	if h.Reason != "" {
		status += " (" + h.Reason + ")"
	}
	return printTable(w, nil, [][]string{
		{"endpoint", h.EndpointID},
		{"status", status},
		{"failing since", whenText(h.FailingSince, "-")},
		{"last success", whenText(h.LastSuccessAt, "never")},
		{"last attempt", whenText(h.LastAttemptAt, "never")},
		{"last hour", h.LastHour.String()},
		{"last day", h.LastDay.String()},
	})
}

// withAPI builds the API client from cmd's flags and runs fn under the
// command's context.
func withAPI(cmd *cobra.Command, fn func(context.Context, *apiClient) error) error {
	c, err := newAPIClient(cmd.Flags())
	if err != nil {
		return err
	}
	return fn(cmd.Context(), c)
}

// apiCommand registers the API client's flags on each of cmds and returns
// them.
func apiCommand(cmds ...*cobra.Command) []*cobra.Command {
	for _, c := range cmds {
		addSettings(c.Flags(), apiClientSettings)
	}
	return cmds
}
