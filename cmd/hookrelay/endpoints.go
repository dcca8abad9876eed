package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// endpointsCmd is `hookrelay endpoints …`. add, update, list, get,
// disable, enable and delete are the operator's: they write the endpoints
// topic directly (broker access, no API needed) and read it to its end
// first, so what they print or check is current. rotate-secret and health
// are clients of the management API (apiClientSettings), whose operations
// they are.
func endpointsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "endpoints", Short: "Manage webhook endpoints (add, list, get, update, disable, enable, delete: Kafka; rotate-secret, health: the management API)"}

	add := &cobra.Command{
		Use:   "add --id ID --url URL [--secret whsec_…] [--events a.b,c.*] [--tenant T] [--rate 10] [--max-in-flight 4]",
		Short: "Create an endpoint; prints the generated secret once when none is given",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withWritableStore(cmd, func(ctx context.Context, s *endpoints.Store) error {
				e, generated, err := endpointFromFlags(cmd.Flags(), nil)
				if err != nil {
					return err
				}
				got, err := s.Create(ctx, *e)
				if err != nil {
					return err
				}
				if generated {
					fmt.Printf("secret: %s\n(shown once: store it now; `endpoints get` shows it masked)\n", e.Secrets[0].Value)
				}
				return printEndpoint(os.Stdout, got)
			})
		},
	}
	endpointFlags(add.Flags(), true)

	update := &cobra.Command{
		Use:   "update --id ID [--url URL] [--secret whsec_… --secret-overlap 24h] [--events …] [--tenant T] [--rate R] [--max-in-flight N]",
		Short: "Change an endpoint; a new --secret keeps the old one signing for --secret-overlap",
		Long: `Change an endpoint: only the flags given change. A new --secret is added and
the previous secrets keep signing for --secret-overlap (rotation without a gap).
An endpoint the pipeline disabled (e.g. after 410 Gone) stays disabled; use
"endpoints enable" to resume it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var got *endpoints.Endpoint
			if err := withWritableStore(cmd, func(ctx context.Context, s *endpoints.Store) error {
				id, _ := cmd.Flags().GetString("id")
				cur, err := s.Get(ctx, id)
				if err != nil {
					return err
				}
				e, _, err := endpointFromFlags(cmd.Flags(), cur)
				if err != nil {
					return err
				}
				if got, err = s.Put(ctx, *e); err != nil {
					return err
				}
				return printEndpoint(os.Stdout, got)
			}); err != nil {
				return err
			}
			if !cmd.Flags().Changed("secret") {
				return nil
			}
			// A rotation: the owner is told when the old secrets stop.
			overlap, _ := cmd.Flags().GetDuration("secret-overlap")
			expire := time.Now().Add(overlap)
			return publishOperational(cmd, got, func(ctx context.Context, o *pipeline.OperatorEvents) error {
				return o.SecretRotated(ctx, got, expire)
			})
		},
	}
	endpointFlags(update.Flags(), false)
	update.Flags().Duration("secret-overlap", 24*time.Hour, "with --secret: how long the previous secrets keep signing")

	list := &cobra.Command{
		Use:   "list",
		Short: "List endpoints (secrets masked)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, s *endpoints.Store) error {
				eps, err := s.List(ctx)
				if err != nil {
					return err
				}
				var rows [][]string
				for _, e := range eps {
					st, reason := e.EffectiveStatus()
					if reason != "" {
						st = endpoints.State(string(st) + " (" + reason + ")")
					}
					masked := e.Masked()
					var secrets []string
					for _, sec := range masked.Secrets {
						secrets = append(secrets, sec.Value)
					}
					rows = append(rows, []string{e.ID, string(st), masked.URL, strings.Join(e.EventTypes, ","), e.TenantID,
						strconv.FormatFloat(e.RatePerSec, 'g', -1, 64), strconv.Itoa(e.MaxInFlight), strings.Join(secrets, " ")})
				}
				return printTable(os.Stdout, []string{"ID", "STATUS", "URL", "EVENTS", "TENANT", "RATE/S", "IN-FLIGHT", "SECRETS"}, rows)
			})
		},
	}

	get := &cobra.Command{
		Use:   "get ID",
		Short: "Show one endpoint as JSON (secrets masked)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, s *endpoints.Store) error {
				e, err := s.Get(ctx, args[0])
				if err != nil {
					return err
				}
				return printEndpoint(os.Stdout, e)
			})
		},
	}

	var reason string
	disable := &cobra.Command{
		Use:   "disable ID",
		Short: "Stop deliveries to an endpoint (queued ones are recorded as abandoned)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var was, e *endpoints.Endpoint
			if err := withWritableStore(cmd, func(ctx context.Context, s *endpoints.Store) (err error) {
				if was, err = s.Get(ctx, args[0]); err != nil {
					return err
				}
				if e, err = s.Disable(ctx, args[0], reason); err != nil {
					return err
				}
				return printEndpoint(os.Stdout, e)
			}); err != nil {
				return err
			}
			return publishOperational(cmd, e, func(ctx context.Context, o *pipeline.OperatorEvents) error { return o.Disabled(ctx, was, e) })
		},
	}
	disable.Flags().StringVar(&reason, "reason", "operator", "why, shown in list and get")
	disable.PreRunE = func(cmd *cobra.Command, _ []string) error { return checkFlagValues(cmd.Flags()) }

	enable := &cobra.Command{
		Use:   "enable ID",
		Short: "Resume deliveries to an endpoint (also clears a disable by the pipeline, e.g. after 410)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var was, e *endpoints.Endpoint
			if err := withWritableStore(cmd, func(ctx context.Context, s *endpoints.Store) (err error) {
				if was, err = s.Get(ctx, args[0]); err != nil {
					return err
				}
				if e, err = s.Enable(ctx, args[0]); err != nil {
					return err
				}
				return printEndpoint(os.Stdout, e)
			}); err != nil {
				return err
			}
			return publishOperational(cmd, e, func(ctx context.Context, o *pipeline.OperatorEvents) error { return o.Enabled(ctx, was, e) })
		},
	}

	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete an endpoint (queued deliveries are recorded as abandoned)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWritableStore(cmd, func(ctx context.Context, s *endpoints.Store) error {
				if err := s.Delete(ctx, args[0]); err != nil {
					return err
				}
				fmt.Printf("deleted %s\n", args[0])
				return nil
			})
		},
	}
	// These write and read the endpoints topic themselves, as an operator
	// with broker access (before any API runs, e.g. to bootstrap).
	for _, c := range []*cobra.Command{add, update, list, get, disable, enable, del} {
		addFlags(c.Flags(), "brokers", "kafka-tls", "kafka-tls-ca", "kafka-sasl-mechanism", "kafka-sasl-user",
			"kafka-sasl-password", "topic-prefix", "replication-factor", "min-insync-replicas")
	}
	cmd.AddCommand(add, update, list, get, disable, enable, del)
	cmd.AddCommand(apiCommand(rotateSecretCmd(), healthCmd())...)
	return cmd
}

func endpointFlags(fs *pflag.FlagSet, create bool) {
	fs.String("id", "", "endpoint ID: 1–128 of A-Z a-z 0-9 . _ - (required)")
	fs.String("url", "", "http or https URL without credentials"+map[bool]string{true: " (required)", false: ""}[create])
	fs.String("secret", "", "whsec_ signing secret of 24–64 bytes (default on add: a new 32-byte secret)")
	fs.StringSlice("events", nil, "event types: exact (invoice.paid), prefix (invoice.*) or * for all (default on add: *)")
	fs.String("tenant", "", "deliver only events whose tenantid extension equals this")
	fs.Float64("rate", 0, "requests per second (default 10)")
	fs.Int("max-in-flight", 0, "concurrent requests (default 4)")
	fs.Duration("timeout", 0, "request timeout (default 10s)")
	fs.Duration("connect-timeout", 0, "connect timeout (default 3s)")
}

// endpointFromFlags builds the endpoint to write: cur with the flags that
// were set applied (update), or a new endpoint (add, cur nil). It reports
// whether it generated the secret.
func endpointFromFlags(fs *pflag.FlagSet, cur *endpoints.Endpoint) (*endpoints.Endpoint, bool, error) {
	e := &endpoints.Endpoint{}
	if cur != nil {
		if !anyChanged(fs, "url", "secret", "events", "tenant", "rate", "max-in-flight", "timeout", "connect-timeout") {
			return nil, false, errors.New("nothing to update: give at least one of --url, --secret, --events, --tenant, --rate, --max-in-flight, --timeout, --connect-timeout")
		}
		e = cur.Clone()
		// Any config write supersedes a disable the pipeline decided on an
		// earlier version (e.g. 410 Gone). An update is not an enable: keep
		// such an endpoint disabled, as the operator's own disable, until
		// `endpoints enable`.
		if st, reason := cur.EffectiveStatus(); st == endpoints.Disabled && e.Status != endpoints.Disabled {
			e.Status, e.DisabledReason = endpoints.Disabled, reason
		}
		e.PipelineStatus = nil
	}
	if err := checkFlagValues(fs); err != nil {
		return nil, false, err
	}
	id, _ := fs.GetString("id")
	if id == "" {
		return nil, false, errors.New("--id is required")
	}
	e.ID = id
	if fs.Changed("url") || cur == nil {
		e.URL, _ = fs.GetString("url")
		if e.URL == "" {
			return nil, false, errors.New("--url is required")
		}
	}
	generated := false
	if fs.Changed("secret-overlap") && !fs.Changed("secret") {
		return nil, false, errors.New("--secret-overlap goes with --secret (the new secret whose predecessors it keeps signing)")
	}
	if secret, _ := fs.GetString("secret"); fs.Changed("secret") { // checked by checkFlagValues
		if cur != nil {
			overlap, _ := fs.GetDuration("secret-overlap")
			until := time.Now().Add(overlap).UTC()
			for i := range e.Secrets {
				if e.Secrets[i].ExpiresAt == nil || e.Secrets[i].ExpiresAt.After(until) {
					e.Secrets[i].ExpiresAt = &until
				}
			}
		}
		e.Secrets = append(e.Secrets, endpoints.Secret{Value: secret})
	} else if cur == nil {
		e.Secrets = []endpoints.Secret{{Value: endpoints.NewSecret()}}
		generated = true
	}
	if fs.Changed("events") {
		e.EventTypes, _ = fs.GetStringSlice("events")
	} else if cur == nil {
		e.EventTypes = []string{endpoints.WildcardAll}
	}
	if fs.Changed("tenant") {
		e.TenantID, _ = fs.GetString("tenant")
	}
	if fs.Changed("rate") {
		e.RatePerSec, _ = fs.GetFloat64("rate")
	}
	if fs.Changed("max-in-flight") {
		e.MaxInFlight, _ = fs.GetInt("max-in-flight")
	}
	if fs.Changed("timeout") {
		e.Timeout, _ = fs.GetDuration("timeout")
	}
	if fs.Changed("connect-timeout") {
		e.ConnectTimeout, _ = fs.GetDuration("connect-timeout")
	}
	return e, generated, nil
}

// checkFlagValues refuses an empty or invalid value of any endpoint flag
// that was given, naming the flag: a flag given explicitly never falls back
// to a default or a generated value (issue 8, item 8). What only the whole
// endpoint can tell (a URL's host, a secret's key length, a connect timeout
// longer than the timeout) is checked by endpoints.Endpoint.Validate, whose
// field errors flagErrors names by flag.
func checkFlagValues(fs *pflag.FlagSet) error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("invalid --%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if err := refuseEmptyFlags(fs); err != nil {
		errs = append(errs, err)
	}
	if fs.Changed("secret") {
		if v, _ := fs.GetString("secret"); strings.TrimSpace(v) != "" {
			if err := endpoints.ParseSecret(v); err != nil {
				bad("secret", "%v (the Standard Webhooks form: whsec_ and the standard base64, with padding, of a %d to %d byte key)",
					err, webhook.MinSecretBytes, webhook.MaxSecretBytes)
			}
		}
	}
	if fs.Changed("events") {
		types, _ := fs.GetStringSlice("events")
		if strings.TrimSpace(strings.Join(types, "")) == "" {
			types = nil // refuseEmptyFlags said so
		}
		for i, p := range types {
			if err := endpoints.ValidatePattern(p); err != nil {
				bad("events", "event type %d: %v", i+1, err)
			}
		}
	}
	if fs.Changed("rate") {
		r, _ := fs.GetFloat64("rate")
		if math.IsNaN(r) || r <= 0 || r > endpoints.MaxRatePerSec {
			bad("rate", "must be > 0 and <= %g requests per second, got %g", endpoints.MaxRatePerSec, r)
		}
	}
	if fs.Changed("max-in-flight") {
		if n, _ := fs.GetInt("max-in-flight"); n < 1 || n > endpoints.MaxMaxInFlight {
			bad("max-in-flight", "must be 1 to %d, got %d", endpoints.MaxMaxInFlight, n)
		}
	}
	for _, name := range []string{"timeout", "connect-timeout"} {
		if fs.Changed(name) {
			if d, _ := fs.GetDuration(name); d <= 0 || d > endpoints.MaxTimeout {
				bad(name, "must be > 0 and <= %s, got %s (omit it for the default)", endpoints.MaxTimeout, d)
			}
		}
	}
	if fs.Changed("secret-overlap") {
		if d, _ := fs.GetDuration("secret-overlap"); d < 0 {
			bad("secret-overlap", "must not be negative, got %s (0 retires the previous secrets at once)", d)
		}
	}
	return errors.Join(errs...)
}

// emptyMeans lists the flags whose empty value has a documented meaning
// ("none"), so giving it empty is not an error.
var emptyMeans = map[string]bool{
	"allow-networks": true, "kafka-tls-ca": true, "kafka-sasl-mechanism": true,
	"kafka-sasl-user": true, "kafka-sasl-password": true,
	"failing-notify-at": true, // only the first failing event
}

// emptyHints tell what to do instead of giving a flag an empty value.
var emptyHints = map[string]string{
	"id":     "give the ID",
	"url":    "give an http or https URL",
	"secret": "give a whsec_ secret, or omit --secret (add generates one)",
	"tenant": "omit --tenant for none (an endpoint's tenant cannot be removed by update: delete and re-create the endpoint)",
	"reason": `omit --reason for "operator"`,
	"events": `give event types, or "*" for all`,
}

// refuseEmptyFlags refuses every flag of fs given explicitly with an empty
// (or blank) value, naming it: an empty value never silently means the
// default or a generated value. The root command runs it before every
// subcommand; flags in emptyMeans are exempt.
func refuseEmptyFlags(fs *pflag.FlagSet) error {
	var errs []error
	fs.Visit(func(f *pflag.Flag) {
		v := f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			v = strings.Join(sv.GetSlice(), "")
		}
		if emptyMeans[f.Name] || strings.TrimSpace(v) != "" {
			return
		}
		msg := fmt.Sprintf("invalid --%s: empty", f.Name)
		if h, ok := emptyHints[f.Name]; ok {
			msg += "; " + h
		} else if f.DefValue != "" && f.DefValue != "[]" {
			msg += fmt.Sprintf("; omit it for the default %q", f.DefValue)
		}
		errs = append(errs, errors.New(msg))
	})
	return errors.Join(errs...)
}

func anyChanged(fs *pflag.FlagSet, names ...string) bool {
	for _, n := range names {
		if fs.Changed(n) {
			return true
		}
	}
	return false
}

// flagOf maps an endpoint field, as named in validation errors, to its flag.
var flagOf = map[string]string{
	"id": "--id", "url": "--url", "secrets": "--secret", "event_types": "--events", "tenantid": "--tenant",
	"rate_per_sec": "--rate", "max_in_flight": "--max-in-flight", "timeout": "--timeout",
	"connect_timeout": "--connect-timeout", "disabled_reason": "--reason",
}

// flagErrors rewrites endpoint validation errors to name the flags.
func flagErrors(err error) error {
	var fe *endpoints.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	var lines []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if errors.As(err, &fe) {
			field, _, _ := strings.Cut(fe.Field, "[")
			if f, ok := flagOf[field]; ok {
				lines = append(lines, fmt.Sprintf("invalid %s: %s", f, fe.Reason))
				return
			}
			lines = append(lines, fe.Error())
			return
		}
		if u := errors.Unwrap(err); u != nil {
			walk(u)
		}
	}
	walk(err)
	return errors.New(strings.Join(lines, "\n"))
}

// withStore connects, runs an endpoints view until fn returns, and stops
// it. Writing commands first create the endpoints and endpoint-status topics
// when missing (`run` creates the rest); reading ones create nothing.
func withStore(cmd *cobra.Command, fn func(context.Context, *endpoints.Store) error) error {
	return withStoreMode(cmd, false, fn)
}

func withWritableStore(cmd *cobra.Command, fn func(context.Context, *endpoints.Store) error) error {
	return withStoreMode(cmd, true, fn)
}

func withStoreMode(cmd *cobra.Command, write bool, fn func(context.Context, *endpoints.Store) error) error {
	cfg, kopts, copts, err := loadKafkaConfig(cmd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
	defer cancel()
	topics := pipeline.NewTopics(cfg.TopicPrefix)
	admin, err := kgo.NewClient(copts...)
	if err != nil {
		return err
	}
	defer admin.Close()
	if !write {
		md, err := kadm.NewClient(admin).ListTopics(ctx, topics.Endpoints)
		if err != nil {
			return cfg.explainKafka(fmt.Errorf("list topics: %w", err))
		}
		if !md.Has(topics.Endpoints) {
			return fmt.Errorf("no endpoints: topic %s does not exist (wrong --topic-prefix? `hookrelay endpoints add` creates it)", topics.Endpoints)
		}
	}
	if write {
		if err := pipeline.EnsureEndpointTopics(ctx, kadm.NewClient(admin), topics, pipeline.TopicLayout{
			ReplicationFactor: cfg.Replication, MinInsyncReplicas: cfg.MinISR,
		}); err != nil {
			return cfg.explainKafka(fmt.Errorf("topics: %w", err))
		}
	}
	view, err := endpoints.NewView(endpoints.Config{Brokers: cfg.Brokers, KafkaOptions: kopts, EndpointsTopic: topics.Endpoints, StatusTopic: topics.EndpointStatus})
	if err != nil {
		return err
	}
	vctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- view.Run(vctx) }()
	// New endpoints and changed URLs are checked against the SSRF guard
	// with this process's HOOKRELAY_ALLOW_NETWORKS: an IP literal the
	// dispatcher would refuse is refused now, not at the first attempt.
	err = flagErrors(fn(ctx, endpoints.NewStore(view, endpoints.CheckAddresses(cfg.AllowNetworks))))
	stop()
	if verr := <-done; err == nil && verr != nil && !errors.Is(verr, context.Canceled) {
		err = verr
	}
	return err
}

// fieldProblems lists the problems of a joined validation error, each
// {"field", "problem"} (or just the text when it names no field).
func fieldProblems(err error) []map[string]string {
	var out []map[string]string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *endpoints.FieldError
		if errors.As(err, &fe) {
			out = append(out, map[string]string{"field": fe.Field, "reason": fe.Reason})
			return
		}
		out = append(out, map[string]string{"problem": err.Error()})
	}
	walk(err)
	return out
}

// printEndpoint prints e as stored (secrets masked), plus what the view
// knows beyond it: the config version, the effective status and the
// pipeline's own status record.
func printEndpoint(w io.Writer, e *endpoints.Endpoint) error {
	b, err := json.Marshal(e.Masked())
	if err != nil {
		return err
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	st, reason := e.EffectiveStatus()
	obj["effective_status"] = st
	if reason != "" {
		obj["effective_reason"] = reason
	}
	if e.PipelineStatus != nil {
		obj["pipeline_status"] = e.PipelineStatus
	}
	health, _, since := e.Health()
	obj["health"] = health
	if since != nil {
		obj["failing_since"] = since
	}
	if e.ConfigError != nil {
		// An unusable record (written by another producer): each problem
		// with its field; nothing is sent to it.
		obj["config_error"] = fieldProblems(e.ConfigError)
	}
	obj["version"] = e.Version
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(obj)
}

// loadKafkaConfig loads the command's settings and the Kafka options a CLI
// command needs: kopts (connection options without seed brokers, for the
// pipeline's stages) and copts (with them, for clients the command makes).
// Errors name the setting that is wrong.
func loadKafkaConfig(cmd *cobra.Command) (*config, []kgo.Opt, []kgo.Opt, error) {
	cfg, err := loadConfig(cmd.Flags())
	if err != nil {
		return nil, nil, nil, err
	}
	kopts, err := cfg.kafkaOpts()
	if err != nil {
		return nil, nil, nil, err
	}
	copts, err := cfg.clientOpts()
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, kopts, copts, nil
}
