package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// recoverCmd is `hookrelay recover --endpoint X --since T`: POST
// /v1/endpoints/{id}/recover (docs/API.md: what it resends, from the DLQ
// and the events topic), then, with --wait, GET /v1/recoveries/{id} until
// every resend has a final outcome.
func recoverCmd() *cobra.Command {
	var endpoint, since, until, idemKey string
	var includeFailed, wait bool
	var waitFor time.Duration
	cmd := &cobra.Command{
		Use:   "recover --endpoint ID --since T [--until T] [--include-failed] [--wait]",
		Short: "Resend, once each, what did not reach an endpoint since T (through the management API); prints the recovery ID",
		Long: `Resend every message of the endpoint since --since (before --until) that did not
arrive: abandoned, skipped, exhausted or expired (failed too with
--include-failed), found in the DLQ or, without a DLQ record, in the events
topic; never one already delivered or still pending. T is an RFC 3339
date-time or a duration ago (24h). With --idempotency-key, a repeat of the
same request resends nothing more. --wait follows the recovery until every
resend has a final outcome; it exits non-zero if any failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if endpoint == "" {
				return fmt.Errorf("--endpoint is required")
			}
			now := time.Now()
			body := map[string]any{"include_failed": includeFailed}
			if since == "" {
				return fmt.Errorf("--since is required")
			}
			t, err := parseWhen("since", since, now)
			if err != nil {
				return err
			}
			body["since"] = t.UTC().Format(time.RFC3339Nano)
			if until != "" {
				u, err := parseWhen("until", until, now)
				if err != nil {
					return err
				}
				body["until"] = u.UTC().Format(time.RFC3339Nano)
			}
			return withAPI(cmd, func(ctx context.Context, c *apiClient) error {
				var res struct {
					ID     string `json:"id"`
					Found  int    `json:"found"`
					Queued int    `json:"queued"`
				}
				if err := c.call(ctx, "POST", "/v1/endpoints/"+url.PathEscape(endpoint)+"/recover", nil, body, &res, "Idempotency-Key", idemKey); err != nil {
					return err
				}
				fmt.Printf("%s\n(recovery of %s: %d found, %d queued; `hookrelay recover --wait` or GET /v1/recoveries/%s follows it)\n",
					res.ID, endpoint, res.Found, res.Queued, res.ID)
				if !wait {
					return nil
				}
				wctx, cancel := context.WithTimeout(ctx, waitFor)
				defer cancel()
				return followRecovery(wctx, c, res.ID, time.Second, os.Stdout)
			})
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "endpoint ID (required)")
	cmd.Flags().StringVar(&since, "since", "", "resend what did not arrive since this instant (required): RFC 3339, or a duration ago such as 24h")
	cmd.Flags().StringVar(&until, "until", "", "and before this instant (default: now)")
	cmd.Flags().BoolVar(&includeFailed, "include-failed", false, "also resend permanent failures (failed: a 4xx other than 408/410/429)")
	cmd.Flags().StringVar(&idemKey, "idempotency-key", "", "send as Idempotency-Key: a repeat within 24 h with the same key resends nothing more")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the recovery until every resend has a final outcome")
	cmd.Flags().DurationVar(&waitFor, "wait-timeout", 30*time.Minute, "with --wait: give up after this long")
	addSettings(cmd.Flags(), apiClientSettings)
	return cmd
}

// recoveryProgress is GET /v1/recoveries/{id}.
type recoveryProgress struct {
	ID        string `json:"id"`
	Found     int    `json:"found"`
	Queued    int    `json:"queued"`
	Delivered int    `json:"delivered"`
	Failed    int    `json:"failed"`
}

// followRecovery polls recovery id every interval, printing a line each
// time its counts change, until every queued resend is delivered or failed
// (an error if any failed) or ctx ends.
func followRecovery(ctx context.Context, c *apiClient, id string, interval time.Duration, w io.Writer) error {
	last := recoveryProgress{Delivered: -1}
	for {
		var p recoveryProgress
		if err := c.call(ctx, "GET", "/v1/recoveries/"+url.PathEscape(id), nil, nil, &p); err != nil {
			if ctx.Err() != nil && last.Delivered >= 0 { // the wait ended during a poll
				return fmt.Errorf("recovery %s: still %d of %d pending: %w", id, last.Queued-last.Delivered-last.Failed, last.Queued, ctx.Err())
			}
			return err
		}
		if p != last {
			fmt.Fprintf(w, "%s  queued %d  delivered %d  failed %d  pending %s\n", time.Now().UTC().Format(time.TimeOnly),
				p.Queued, p.Delivered, p.Failed, strconv.Itoa(p.Queued-p.Delivered-p.Failed))
			last = p
		}
		if p.Delivered+p.Failed >= p.Queued {
			if p.Failed > 0 {
				return fmt.Errorf("recovery %s: %d of %d resends failed (`hookrelay dlq list --endpoint …` shows why)", id, p.Failed, p.Queued)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("recovery %s: still %d of %d pending: %w", id, p.Queued-p.Delivered-p.Failed, p.Queued, ctx.Err())
		case <-time.After(interval):
		}
	}
}
