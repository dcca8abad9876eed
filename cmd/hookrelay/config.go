package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/hookrelay/hookrelay/audit/chstore"
	"github.com/hookrelay/hookrelay/audit/sink"
	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
	"github.com/hookrelay/hookrelay/retrytiers"
)

// config is everything hookrelay reads from flags and HOOKRELAY_*
// environment variables. A flag wins over its variable; the variable over
// the default. Only this package reads either.
type config struct {
	Brokers       []string
	TLS           bool
	TLSCAFile     string
	SASLMechanism string // "", PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	SASLUser      string
	SASLPassword  string
	ClickHouseDSN string
	// ClickHousePassword overrides the DSN's password ("": the DSN's);
	// ClickHouseTLSCA is a PEM file of CAs for the DSN's secure=true.
	ClickHousePassword string
	ClickHouseTLSCA    string
	TopicPrefix        string
	Partitions         int32
	Replication        int16
	MinISR             int
	InstanceID         string
	HTTPAddr           string
	APIAddr            string
	AllowNetworks      []netip.Prefix
	RetrySchedule      retrytiers.Schedule
	QueueTTL           time.Duration
	SessionTimeout     time.Duration
	Roles              map[string]bool
	MaxEventBytes      int
	EndpointBuffer     int
	MemoryBudget       int64 // bytes: fetch buffers, held deliveries, producer buffers (see memoryShares)
	InterruptGrace     time.Duration
	FanoutLinger       time.Duration // 0: none
	LogRetention       time.Duration
	DisableAfter       time.Duration
	FailingNotify      []float64
	AttemptFormat      pipeline.AttemptFormat
}

// setting is one configurable value: its flag, its environment variable, its
// default and its help.
type setting struct {
	flag, env, def, help string
}

// secretVariables are never a flag's shown default (--help would print
// them): their reader takes the variable itself when the flag is not given.
var secretVariables = map[string]bool{"HOOKRELAY_API_KEY": true}

var settings = []setting{
	{"brokers", "HOOKRELAY_BROKERS", "127.0.0.1:9092", "Kafka bootstrap brokers, comma-separated host:port"},
	{"kafka-tls", "HOOKRELAY_KAFKA_TLS", "false", "connect to Kafka over TLS"},
	{"kafka-tls-ca", "HOOKRELAY_KAFKA_TLS_CA", "", "PEM file of CAs to trust for Kafka TLS (default: system roots)"},
	{"kafka-sasl-mechanism", "HOOKRELAY_KAFKA_SASL_MECHANISM", "", "Kafka SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: none)"},
	{"kafka-sasl-user", "HOOKRELAY_KAFKA_SASL_USER", "", "Kafka SASL user"},
	{"kafka-sasl-password", "HOOKRELAY_KAFKA_SASL_PASSWORD", "", "Kafka SASL password"},
	{"clickhouse", "HOOKRELAY_CLICKHOUSE", "clickhouse://127.0.0.1:9000/hookrelay", "ClickHouse DSN (native protocol) with user, password and database; secure=true for TLS (native TLS port, 9440 by default)"},
	{"clickhouse-password", "HOOKRELAY_CLICKHOUSE_PASSWORD", "", "ClickHouse password, overriding the DSN's (keeps it out of the DSN, e.g. in a Secret)"},
	{"clickhouse-tls-ca", "HOOKRELAY_CLICKHOUSE_TLS_CA", "", "PEM file of CAs to trust for ClickHouse TLS (needs secure=true in the DSN; default: system roots)"},
	{"topic-prefix", "HOOKRELAY_TOPIC_PREFIX", pipeline.DefaultTopicPrefix, "prefix of every topic, consumer group and transactional ID"},
	{"partitions", "HOOKRELAY_PARTITIONS", "12", "partitions of the events, deliveries, tier, attempts and dlq topics (the deliveries count is fixed once created)"},
	{"replication-factor", "HOOKRELAY_REPLICATION_FACTOR", "0", "replication factor of created topics (0: 3 with three or more brokers, else the broker default; -1: the broker default)"},
	{"min-insync-replicas", "HOOKRELAY_MIN_INSYNC_REPLICAS", "0", "min.insync.replicas of created topics (0: 2 with three or more brokers and a replication factor of 3 or more, else the broker default; -1: the broker default)"},
	{"instance-id", "HOOKRELAY_INSTANCE_ID", "", "stable name of this process, unique among live ones (two processes on one host need their own); names its transactional producers and static group members (default: host name)"},
	{"http-addr", "HOOKRELAY_HTTP_ADDR", "127.0.0.1:8080", "address of /metrics, /healthz, /readyz and /debug/pprof/ (keep it off public interfaces)"},
	{"api-addr", "HOOKRELAY_API_ADDR", "127.0.0.1:8088", "address of the management API (role api; /v1, see docs/API.md)"},
	{"allow-networks", "HOOKRELAY_ALLOW_NETWORKS", "", "CIDRs the SSRF guard lets through although not global, comma-separated (e.g. 127.0.0.0/8)"},
	{"retry-schedule", "HOOKRELAY_RETRY_SCHEDULE", retrytiers.DefaultSchedule().String(), "delays after each failed attempt, comma-separated durations; attempts = delays + 1"},
	{"queue-ttl", "HOOKRELAY_QUEUE_TTL", pipeline.DefaultQueueTTL.String(), "events older than this are not attempted (expired, to the DLQ)"},
	{"group-session-timeout", "HOOKRELAY_GROUP_SESSION_TIMEOUT", defaultSessionTimeout.String(), "consumer-group session timeout: how long a dead instance keeps its partitions (a restart with the same instance ID within it keeps them without a rebalance); 6s..5m"},
	{"disable-after", "HOOKRELAY_DISABLE_AFTER", pipeline.DefaultDisableAfter.String(), "disable an endpoint (reason failing) after it has failed this long without a success; 429s never count. Default 72h, between the seeds' 24 h and 3 days: it outlasts the retry schedule (~26 h) and the queue TTL (48 h), so a disable never cuts a delivery's retries short, and a weekend outage does not disable"},
	{"failing-notify-at", "HOOKRELAY_FAILING_NOTIFY_AT", "0.5,0.9", "fractions of --disable-after, comma-separated, each in (0,1) and increasing, at which another hookrelay.endpoint.failing event is sent (empty: only the first)"},
	{"roles", "HOOKRELAY_ROLES", "fanout,dispatch,retry,audit,api", "stages this process runs, comma-separated: fanout, dispatch, retry, audit, api"},
	{"max-event-bytes", "HOOKRELAY_MAX_EVENT_BYTES", "262144", "largest events-topic record accepted, in bytes"},
	{"endpoint-backlog", "HOOKRELAY_ENDPOINT_BACKLOG", "1000", "deliveries held in memory per endpoint before new ones are parked in a delay tier"},
	{"memory-budget", "HOOKRELAY_MEMORY_BUDGET", "192MiB", "bytes of Kafka fetch buffers, deliveries held by the dispatcher, producer buffers and the audit sink's insert batch together, shared by the stages this process runs (binary units: 256MiB, 1GiB; at least 16MiB); past the dispatcher's share, the overflow of the endpoints holding the most is parked in a delay tier"},
	{"fanout-linger", "HOOKRELAY_FANOUT_LINGER", pipeline.DefaultFanoutLinger.String(), "how long fan-out keeps polling after events arrived, so one transaction carries them all (fewer, larger transactions; at most this much extra latency); 0: one transaction per poll"},
	{"audit-interrupt-grace", "HOOKRELAY_AUDIT_INTERRUPT_GRACE", sink.DefaultInterruptGrace.String(), "how long the audit sink waits for an attempt's outcome after its sending row before logging it interrupted (see audit/sink)"},
	{"attempt-format", "HOOKRELAY_ATTEMPT_FORMAT", string(pipeline.AttemptJSON), "encoding of the attempts-topic records this process writes: json (read by every release) or binary (cheaper; read only by this release and later). Default json in this release; the next release makes binary the default once every audit sink reads both, so switch to binary only after all instances run this release"},
	{"log-retention", "HOOKRELAY_LOG_RETENTION", chstore.DefaultRetention.String(), "how long the delivery log (attempts and its views) is kept, at least 24h (default 30 days): a table TTL on ClickHouse 19.6+, else the audit role drops whole UTC-day partitions older than it, hourly"},
}

// addFlags registers every setting on fs (or only those named),
// defaulting from the environment.
func addFlags(fs *pflag.FlagSet, only ...string) { addSettings(fs, settings, only...) }

// addSettings registers the settings of list on fs (or only those named),
// defaulting from the environment.
func addSettings(fs *pflag.FlagSet, list []setting, only ...string) {
	want := map[string]bool{}
	for _, o := range only {
		want[o] = true
	}
	for _, s := range list {
		if len(only) > 0 && !want[s.flag] {
			continue
		}
		def := s.def
		if v, ok := os.LookupEnv(s.env); ok && !secretVariables[s.env] {
			def = v
		}
		fs.String(s.flag, def, fmt.Sprintf("%s [%s]", s.help, s.env))
	}
}

// loadConfig parses the registered settings. Errors name the flag and its
// variable.
func loadConfig(fs *pflag.FlagSet) (*config, error) {
	get := func(name string) string {
		f := fs.Lookup(name)
		if f == nil {
			for _, s := range settings {
				if s.flag == name {
					if v, ok := os.LookupEnv(s.env); ok {
						return v
					}
					return s.def
				}
			}
			return ""
		}
		return f.Value.String()
	}
	bad := func(name string, err error) error {
		env := ""
		for _, s := range settings {
			if s.flag == name {
				env = s.env
			}
		}
		return fmt.Errorf("invalid --%s (%s): %w", name, env, err)
	}
	c := &config{}
	for _, b := range strings.Split(get("brokers"), ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	if len(c.Brokers) == 0 {
		return nil, bad("brokers", errors.New("at least one broker is required"))
	}
	var err error
	if c.TLS, err = strconv.ParseBool(get("kafka-tls")); err != nil {
		return nil, bad("kafka-tls", err)
	}
	c.TLSCAFile = get("kafka-tls-ca")
	if c.TLSCAFile != "" && !c.TLS {
		return nil, bad("kafka-tls-ca", errors.New("set, but --kafka-tls (HOOKRELAY_KAFKA_TLS) is off"))
	}
	c.SASLMechanism = strings.ToUpper(get("kafka-sasl-mechanism"))
	c.SASLUser, c.SASLPassword = get("kafka-sasl-user"), get("kafka-sasl-password")
	switch c.SASLMechanism {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return nil, bad("kafka-sasl-mechanism", fmt.Errorf("unknown mechanism %q", c.SASLMechanism))
	}
	if c.SASLMechanism != "" && c.SASLUser == "" {
		return nil, bad("kafka-sasl-user", errors.New("required with a SASL mechanism"))
	}
	c.ClickHouseDSN = get("clickhouse")
	if !strings.HasPrefix(c.ClickHouseDSN, "clickhouse://") && !strings.HasPrefix(c.ClickHouseDSN, "tcp://") {
		return nil, bad("clickhouse", errors.New("must be a native-protocol DSN, clickhouse://user:password@host:9000/database"))
	}
	c.ClickHousePassword = get("clickhouse-password")
	c.ClickHouseTLSCA = get("clickhouse-tls-ca")
	if c.ClickHouseTLSCA != "" {
		u, err := url.Parse(c.ClickHouseDSN)
		if err != nil {
			return nil, bad("clickhouse", err)
		}
		if secure, _ := strconv.ParseBool(u.Query().Get("secure")); !secure {
			return nil, bad("clickhouse-tls-ca", errors.New("set, but the DSN (--clickhouse, HOOKRELAY_CLICKHOUSE) has no secure=true"))
		}
	}
	c.TopicPrefix = get("topic-prefix")
	if i := strings.IndexFunc(c.TopicPrefix, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}); i >= 0 || len(c.TopicPrefix) > 200 {
		return nil, bad("topic-prefix", fmt.Errorf("must be at most 200 of A-Z a-z 0-9 . _ - (Kafka topic names), got %q", c.TopicPrefix))
	}
	n, err := strconv.ParseInt(get("partitions"), 10, 32)
	if err != nil || n < 1 {
		return nil, bad("partitions", fmt.Errorf("must be a positive integer, got %q", get("partitions")))
	}
	c.Partitions = int32(n)
	rf, err := strconv.ParseInt(get("replication-factor"), 10, 16)
	if err != nil || rf < -1 {
		return nil, bad("replication-factor", fmt.Errorf("must be -1, 0 or a positive integer, got %q", get("replication-factor")))
	}
	c.Replication = int16(rf)
	if c.MinISR, err = strconv.Atoi(get("min-insync-replicas")); err != nil || c.MinISR < -1 {
		return nil, bad("min-insync-replicas", fmt.Errorf("must be -1, 0 or a positive integer, got %q", get("min-insync-replicas")))
	}
	c.InstanceID = get("instance-id")
	if c.InstanceID == "" {
		if c.InstanceID, err = os.Hostname(); err != nil || c.InstanceID == "" {
			return nil, bad("instance-id", errors.New("not set and the host name is unknown"))
		}
	}
	c.HTTPAddr = get("http-addr")
	if strings.TrimSpace(c.HTTPAddr) == "" {
		// net.Listen("tcp", "") would listen on every interface.
		return nil, bad("http-addr", errors.New("required: host:port, e.g. 127.0.0.1:8080"))
	}
	c.APIAddr = get("api-addr")
	if strings.TrimSpace(c.APIAddr) == "" {
		return nil, bad("api-addr", errors.New("required: host:port, e.g. 127.0.0.1:8088"))
	}
	if c.AllowNetworks, err = webhook.ParseAllowList(get("allow-networks")); err != nil {
		return nil, bad("allow-networks", err)
	}
	if c.RetrySchedule, err = retrytiers.ParseSchedule(get("retry-schedule")); err != nil {
		return nil, bad("retry-schedule", err)
	}
	if c.QueueTTL, err = time.ParseDuration(get("queue-ttl")); err != nil || c.QueueTTL <= 0 {
		return nil, bad("queue-ttl", fmt.Errorf("must be a positive duration, got %q", get("queue-ttl")))
	}
	// Kafka's broker defaults bound it: group.min.session.timeout.ms 6 s,
	// group.max.session.timeout.ms 30 min; we keep it well inside.
	if c.SessionTimeout, err = time.ParseDuration(get("group-session-timeout")); err != nil || c.SessionTimeout < 6*time.Second || c.SessionTimeout > 5*time.Minute {
		return nil, bad("group-session-timeout", fmt.Errorf("must be a duration from 6s to 5m, got %q", get("group-session-timeout")))
	}
	if c.DisableAfter, err = time.ParseDuration(get("disable-after")); err != nil || c.DisableAfter <= 0 {
		return nil, bad("disable-after", fmt.Errorf("must be a positive duration, got %q", get("disable-after")))
	}
	c.FailingNotify = []float64{}
	for _, f := range strings.Split(get("failing-notify-at"), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0 && v < 1) || (len(c.FailingNotify) > 0 && v <= c.FailingNotify[len(c.FailingNotify)-1]) {
			return nil, bad("failing-notify-at", fmt.Errorf("want increasing fractions in (0,1), e.g. 0.5,0.9; got %q", get("failing-notify-at")))
		}
		c.FailingNotify = append(c.FailingNotify, v)
	}
	c.Roles = map[string]bool{}
	for _, r := range strings.Split(get("roles"), ",") {
		switch r = strings.TrimSpace(r); r {
		case "fanout", "dispatch", "retry", "audit", "api":
			c.Roles[r] = true
		case "":
		default:
			return nil, bad("roles", fmt.Errorf("unknown role %q (want fanout, dispatch, retry, audit, api)", r))
		}
	}
	if len(c.Roles) == 0 {
		return nil, bad("roles", errors.New("at least one role is required"))
	}
	// Binary data grows by 4/3 as base64 in the webhook body, and a
	// delivery record must fit Kafka's default 1 MiB message limit.
	if c.MaxEventBytes, err = strconv.Atoi(get("max-event-bytes")); err != nil || c.MaxEventBytes < 1 || c.MaxEventBytes > 512<<10 {
		return nil, bad("max-event-bytes", fmt.Errorf("must be an integer from 1 to 524288 (512 KiB), got %q", get("max-event-bytes")))
	}
	if c.MemoryBudget, err = units.RAMInBytes(get("memory-budget")); err != nil || c.MemoryBudget < minMemoryBudget {
		return nil, bad("memory-budget", fmt.Errorf("must be a size of at least 16MiB, e.g. 256MiB, got %q", get("memory-budget")))
	}
	if c.EndpointBuffer, err = strconv.Atoi(get("endpoint-backlog")); err != nil || c.EndpointBuffer < 1 {
		return nil, bad("endpoint-backlog", fmt.Errorf("must be a positive integer, got %q", get("endpoint-backlog")))
	}
	if c.FanoutLinger, err = time.ParseDuration(get("fanout-linger")); err != nil || c.FanoutLinger < 0 || c.FanoutLinger > time.Second {
		return nil, bad("fanout-linger", fmt.Errorf("must be a duration from 0 to 1s, got %q", get("fanout-linger")))
	}
	if c.InterruptGrace, err = time.ParseDuration(get("audit-interrupt-grace")); err != nil || c.InterruptGrace <= 0 {
		return nil, bad("audit-interrupt-grace", fmt.Errorf("must be a positive duration, got %q", get("audit-interrupt-grace")))
	}
	if c.LogRetention, err = time.ParseDuration(get("log-retention")); err != nil || c.LogRetention < 24*time.Hour {
		return nil, bad("log-retention", fmt.Errorf("must be a duration of at least 24h (e.g. 720h for 30 days), got %q", get("log-retention")))
	}
	if c.AttemptFormat, err = pipeline.ParseAttemptFormat(get("attempt-format")); err != nil {
		return nil, bad("attempt-format", fmt.Errorf("must be json or binary, got %q", get("attempt-format")))
	}
	return c, nil
}

// defaultSessionTimeout is the consumer-group session timeout of every
// hookrelay group: 10 s. A dead instance's partitions move to a survivor
// after it (issue 10: within 15 s); a restart of the same instance (static
// membership) rejoins well within it and keeps its partitions without a
// rebalance. The cost of a shorter one: an instance that cannot heartbeat
// for 10 s (a long stop-the-world pause, a network partition) loses its
// partitions and rejoins with a rebalance.
const defaultSessionTimeout = 10 * time.Second

// kafkaOpts are the connection options every client shares, without the
// seed brokers: the stages take those as Brokers and these as
// KafkaOptions (docs/ARCHITECTURE.md, "Stages"); a client of cmd/ itself
// uses [config.clientOpts].
func (c *config) kafkaOpts() ([]kgo.Opt, error) {
	// Fetch at most 16 MiB per request (franz-go's default is 50 MiB per
	// client): fetched batches stay in memory while their records wait, and
	// hookrelay runs several consumers.
	opts := []kgo.Opt{kgo.FetchMaxBytes(16 << 20),
		// Consumer groups: a dead instance's partitions move after the
		// session timeout (franz-go's default is 45 s); heartbeats every
		// tenth of it.
		kgo.SessionTimeout(c.SessionTimeout), kgo.HeartbeatInterval(c.SessionTimeout / 10)}
	if c.TLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pool, err := readCAs(c.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("invalid --kafka-tls-ca (HOOKRELAY_KAFKA_TLS_CA): %w", err)
			}
			tc.RootCAs = pool
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch c.SASLMechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha512Mechanism()))
	}
	return opts, nil
}

// clientOpts are the options of a client cmd/ creates itself: the seed
// brokers, then [config.kafkaOpts].
func (c *config) clientOpts() ([]kgo.Opt, error) {
	opts, err := c.kafkaOpts()
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, opts...), nil
}

// readCAs reads a PEM file of CA certificates.
func readCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", path)
	}
	return pool, nil
}

// storeOptions are the ClickHouse options of every store cmd/ opens: the
// DSN, the password that overrides its own, and the TLS configuration of
// --clickhouse-tls-ca (nil without it: the DSN's secure=true then uses the
// system roots).
func (c *config) storeOptions() (chstore.Options, error) {
	o := chstore.Options{DSN: c.ClickHouseDSN, Password: c.ClickHousePassword}
	if c.ClickHouseTLSCA != "" {
		pool, err := readCAs(c.ClickHouseTLSCA)
		if err != nil {
			return o, fmt.Errorf("invalid --clickhouse-tls-ca (HOOKRELAY_CLICKHOUSE_TLS_CA): %w", err)
		}
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	return o, nil
}
