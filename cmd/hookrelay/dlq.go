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

// dlqRetention is the DLQ topic's retention (docs/API.md): `dlq show`
// looks that far back by default.
const dlqRetention = 30 * 24 * time.Hour

// dlqCmd is `hookrelay dlq list|show|replay`: GET /v1/dlq and POST
// /v1/dlq/replay of the management API.
func dlqCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "dlq", Short: "List, show and replay DLQ records (through the management API)"}
	cmd.AddCommand(apiCommand(dlqListCmd(), dlqShowCmd(), dlqReplayCmd())...)
	return cmd
}

// dlqRecord is one DLQ record of GET /v1/dlq (schema DLQRecord).
type dlqRecord struct {
	EndpointID string    `json:"endpoint_id"`
	WebhookID  string    `json:"webhook_id"`
	DeliveryID string    `json:"delivery_id"`
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type"`
	Reason     string    `json:"reason"`
	LastError  string    `json:"last_error"`
	Attempts   int       `json:"attempts"`
	At         time.Time `json:"at"`
	Partition  int32     `json:"partition"`
	Offset     int64     `json:"offset"`
}

// timeQuery adds since and until (parseWhen forms) to q.
func timeQuery(q url.Values, since, until string, now time.Time) error {
	for _, t := range []struct{ name, v string }{{"since", since}, {"until", until}} {
		if t.v == "" {
			continue
		}
		at, err := parseWhen(t.name, t.v, now)
		if err != nil {
			return err
		}
		q.Set(t.name, at.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func listDLQ(ctx context.Context, c *apiClient, q url.Values) ([]dlqRecord, bool, error) {
	var res struct {
		Data      []dlqRecord `json:"data"`
		Truncated bool        `json:"truncated"`
	}
	err := c.call(ctx, "GET", "/v1/dlq", q, nil, &res)
	return res.Data, res.Truncated, err
}

func printDLQ(w io.Writer, recs []dlqRecord, truncated bool) error {
	var rows [][]string
	for _, r := range recs {
		lastErr := r.LastError
		if len(lastErr) > 80 {
			lastErr = lastErr[:77] + "..."
		}
		rows = append(rows, []string{r.At.UTC().Format(time.RFC3339), r.EndpointID, r.WebhookID, r.EventType, r.Reason,
			strconv.Itoa(r.Attempts), fmt.Sprintf("%d/%d", r.Partition, r.Offset), lastErr})
	}
	if err := printTable(w, []string{"AT", "ENDPOINT", "WEBHOOK-ID", "EVENT-TYPE", "REASON", "ATTEMPTS", "PARTITION/OFFSET", "LAST-ERROR"}, rows); err != nil {
		return err
	}
	if truncated {
		_, err := fmt.Fprintln(w, "(more records matched: narrow --since/--until or raise --limit)")
		return err
	}
	return nil
}

func dlqListCmd() *cobra.Command {
	var endpoint, since, until string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--endpoint ID] [--since T] [--until T] [--limit N]",
		Short: "List DLQ records, oldest first (default: the last 24 h)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if endpoint != "" {
				q.Set("endpoint_id", endpoint)
			}
			if err := timeQuery(q, since, until, time.Now()); err != nil {
				return err
			}
			return withAPI(cmd, func(ctx context.Context, c *apiClient) error {
				recs, truncated, err := listDLQ(ctx, c, q)
				if err != nil {
					return err
				}
				return printDLQ(os.Stdout, recs, truncated)
			})
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "only this endpoint's records (default: every one the key sees)")
	cmd.Flags().StringVar(&since, "since", "", "records put in the DLQ since: RFC 3339, or a duration ago such as 2h (default 24h)")
	cmd.Flags().StringVar(&until, "until", "", "and before this instant")
	cmd.Flags().IntVar(&limit, "limit", 100, "records to list (at most 1000)")
	return cmd
}

func dlqShowCmd() *cobra.Command {
	var endpoint, since string
	cmd := &cobra.Command{
		Use:   "show MSG_ID --endpoint ID [--since T]",
		Short: "Show one message (webhook-id) of an endpoint: its DLQ records and every attempt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if endpoint == "" {
				return fmt.Errorf("--endpoint is required")
			}
			q := url.Values{"endpoint_id": {endpoint}, "webhook_id": {args[0]}, "limit": {"1000"}}
			if err := timeQuery(q, since, "", time.Now()); err != nil {
				return err
			}
			return withAPI(cmd, func(ctx context.Context, c *apiClient) error {
				recs, truncated, err := listDLQ(ctx, c, q)
				if err != nil {
					return err
				}
				var msg struct {
					Attempts []struct {
						AttemptID     string    `json:"attempt_id"`
						DeliveryID    string    `json:"delivery_id"`
						AttemptNumber int       `json:"attempt_number"`
						AttemptedAt   time.Time `json:"attempted_at"`
						LatencyMs     int64     `json:"latency_ms"`
						HTTPStatus    int       `json:"http_status"`
						Outcome       string    `json:"outcome"`
						ErrorClass    string    `json:"error_class"`
						ErrorMessage  string    `json:"error_message"`
					} `json:"attempts"`
				}
				err = c.call(ctx, "GET", "/v1/endpoints/"+url.PathEscape(endpoint)+"/messages/"+url.PathEscape(args[0]), nil, nil, &msg)
				if err != nil && apiStatus(err) != 404 {
					return err
				}
				if len(recs) == 0 && len(msg.Attempts) == 0 {
					return fmt.Errorf("message %s of endpoint %s: no DLQ record since %s and no attempt", args[0], endpoint, q.Get("since"))
				}
				fmt.Printf("message %s to endpoint %s\n\nDLQ records:\n", args[0], endpoint)
				if err := printDLQ(os.Stdout, recs, truncated); err != nil {
					return err
				}
				fmt.Println("\nattempts, newest first:")
				var rows [][]string
				for _, a := range msg.Attempts {
					why := a.ErrorClass
					if a.ErrorMessage != "" {
						why += " " + a.ErrorMessage
					}
					rows = append(rows, []string{a.AttemptedAt.UTC().Format(time.RFC3339Nano), strconv.Itoa(a.AttemptNumber), a.Outcome,
						strconv.Itoa(a.HTTPStatus), strconv.FormatInt(a.LatencyMs, 10) + "ms", a.DeliveryID, why})
				}
				return printTable(os.Stdout, []string{"ATTEMPTED", "#", "OUTCOME", "HTTP", "LATENCY", "DELIVERY", "ERROR"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the endpoint (required)")
	cmd.Flags().StringVar(&since, "since", dlqRetention.String(), "DLQ records since: RFC 3339, or a duration ago (default: the DLQ's 30-day retention)")
	return cmd
}

func dlqReplayCmd() *cobra.Command {
	var endpoint, since, until, idemKey string
	cmd := &cobra.Command{
		Use:   "replay --endpoint ID --since T [--until T] [--idempotency-key K]",
		Short: "Resend the newest DLQ record of every message of an endpoint in [since, until), whatever its reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if endpoint == "" || since == "" {
				return fmt.Errorf("--endpoint and --since are required")
			}
			q := url.Values{}
			if err := timeQuery(q, since, until, time.Now()); err != nil {
				return err
			}
			body := map[string]string{"endpoint_id": endpoint, "since": q.Get("since")}
			if u := q.Get("until"); u != "" {
				body["until"] = u
			}
			return withAPI(cmd, func(ctx context.Context, c *apiClient) error {
				var res struct {
					Replayed int `json:"replayed"`
					Resends  []struct {
						WebhookID string `json:"webhook_id"`
						ResendID  string `json:"resend_id"`
					} `json:"resends"`
				}
				if err := c.call(ctx, "POST", "/v1/dlq/replay", nil, body, &res, "Idempotency-Key", idemKey); err != nil {
					return err
				}
				fmt.Printf("replayed %d messages to %s\n", res.Replayed, endpoint)
				var rows [][]string
				for _, r := range res.Resends {
					rows = append(rows, []string{r.WebhookID, r.ResendID})
				}
				return printTable(os.Stdout, []string{"WEBHOOK-ID", "RESEND-ID"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "endpoint ID (required)")
	cmd.Flags().StringVar(&since, "since", "", "records put in the DLQ since (required): RFC 3339, or a duration ago such as 24h")
	cmd.Flags().StringVar(&until, "until", "", "and before this instant")
	cmd.Flags().StringVar(&idemKey, "idempotency-key", "", "send as Idempotency-Key: a repeat within 24 h with the same key resends nothing more")
	return cmd
}
