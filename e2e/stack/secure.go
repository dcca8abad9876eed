package stack

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SecureSide is the secured side of the local stack (deploy/local/env.sh,
// secure_material; docs/OPERATIONS.md, "Secured mode"): the same Kafka
// cluster on SASL_SSL listeners (TLS with a CA generated at the stack's first
// start, SCRAM-SHA-512), and the same ClickHouse on its TLS native port with
// a password user. Tests isolate themselves in it as on the plain side
// ([TopicPrefix], [Database]: the topics and databases are the same).
type SecureSide struct {
	// Brokers are the SASL_SSL listeners, host:port.
	Brokers []string
	// CAFile is the PEM file of the stack's CA (the Kafka and ClickHouse
	// server certificates are signed by it).
	CAFile string
	// Mechanism, User and Password are the Kafka SASL credentials.
	Mechanism, User, Password string
	// ClickHouseDSN is the TLS native port's DSN with the user, without
	// password, secure=true, database default.
	ClickHouseDSN string
	// ClickHousePassword is the password of the DSN's user.
	ClickHousePassword string
	// ClickHouseCAFile is the PEM file of CAs for ClickHouse TLS.
	ClickHouseCAFile string

	vars map[string]string // the env file, HOOKRELAY_* → value
}

var (
	secureOnce sync.Once
	secureSide *SecureSide
	secureErr  error
)

// Secure returns the secured side of the local stack, read from the file
// secure/env of [StackDir] that deploy/local/up.sh writes. It fails the test
// when the file is missing or nothing answers on its ports (a stack started
// by an older up.sh: restart it), and skips it when the test Kafka is not
// the local stack (no HOOKRELAY_BROKERS: a container, which has no secured
// side).
func Secure(t testing.TB) *SecureSide {
	t.Helper()
	Brokers(t)
	if _, set := os.LookupEnv(EnvBrokers); !set {
		t.Skipf("stack: the secured side exists on the local stack only (deploy/local); %s is unset (containers)", EnvBrokers)
	}
	secureOnce.Do(func() { secureSide, secureErr = readSecure() })
	if secureErr != nil {
		t.Fatalf("stack: no secured side: %v", secureErr)
	}
	return secureSide
}

func readSecure() (*SecureSide, error) {
	dir, err := StackDir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "secure", "env")
	const restart = "the stack was started before it had a secured side: restart it (make down; make up), or set " + EnvStackDir + " to the state folder of the stack in " + EnvBrokers
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, restart)
	}
	defer f.Close()
	s := &SecureSide{vars: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "HOOKRELAY_") {
			s.vars[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	get := func(k string) string { return s.vars[k] }
	s.Brokers = strings.Split(get("HOOKRELAY_BROKERS"), ",")
	s.CAFile = get("HOOKRELAY_KAFKA_TLS_CA")
	s.Mechanism, s.User, s.Password = get("HOOKRELAY_KAFKA_SASL_MECHANISM"), get("HOOKRELAY_KAFKA_SASL_USER"), get("HOOKRELAY_KAFKA_SASL_PASSWORD")
	s.ClickHouseDSN, s.ClickHousePassword, s.ClickHouseCAFile = get("HOOKRELAY_CLICKHOUSE"), get("HOOKRELAY_CLICKHOUSE_PASSWORD"), get("HOOKRELAY_CLICKHOUSE_TLS_CA")
	for k, v := range map[string]string{"HOOKRELAY_BROKERS": s.Brokers[0], "HOOKRELAY_KAFKA_TLS_CA": s.CAFile,
		"HOOKRELAY_KAFKA_SASL_PASSWORD": s.Password, "HOOKRELAY_CLICKHOUSE": s.ClickHouseDSN, "HOOKRELAY_CLICKHOUSE_PASSWORD": s.ClickHousePassword} {
		if v == "" {
			return nil, fmt.Errorf("%s has no %s", path, k)
		}
	}
	if s.Mechanism != "SCRAM-SHA-512" {
		return nil, fmt.Errorf("%s: HOOKRELAY_KAFKA_SASL_MECHANISM=%q, want SCRAM-SHA-512", path, s.Mechanism)
	}
	if err := anyAnswers(s.Brokers); err != nil {
		return nil, fmt.Errorf("SASL_SSL listeners %v of %s: %v: %s", s.Brokers, path, err, restart)
	}
	u, err := url.Parse(s.ClickHouseDSN)
	if err != nil {
		return nil, fmt.Errorf("%s: HOOKRELAY_CLICKHOUSE: %w", path, err)
	}
	if err := anyAnswers([]string{u.Host}); err != nil {
		return nil, fmt.Errorf("ClickHouse TLS port %s of %s: %v: %s", u.Host, path, err, restart)
	}
	return s, nil
}

// DSN returns ClickHouseDSN with database db.
func (s *SecureSide) DSN(db string) string {
	u, _ := url.Parse(s.ClickHouseDSN) // parsed by readSecure
	u.Path = "/" + db
	return u.String()
}

// Env returns the HOOKRELAY_* settings of a hookrelay on the secured side
// whose audit log is in database db: brokers, TLS with the CA, SCRAM, and
// the ClickHouse DSN (TLS, user; password in HOOKRELAY_CLICKHOUSE_PASSWORD).
func (s *SecureSide) Env(db string) []string {
	var env []string
	for k, v := range s.vars {
		if k == "HOOKRELAY_CLICKHOUSE" {
			v = s.DSN(db)
		}
		env = append(env, k+"="+v)
	}
	return env
}

// tlsConfig trusts the PEM file ca only.
func tlsConfig(t testing.TB, ca string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatalf("stack: CA of the secured side: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("stack: no certificate in %s", ca)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
}

// Client returns a franz-go client of the secured side (its brokers, TLS,
// SCRAM-SHA-512) and then opts, closed when the test ends.
func (s *SecureSide) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(s.Brokers...), kgo.DialTLSConfig(tlsConfig(t, s.CAFile)),
		kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism())}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("stack: kgo.NewClient (secured side): %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ClickHouse returns a connection to database db over the TLS native port
// as the password user, closed when the test ends.
func (s *SecureSide) ClickHouse(t testing.TB, db string) driver.Conn {
	t.Helper()
	opts, err := clickhouse.ParseDSN(s.DSN(db))
	if err != nil {
		t.Fatalf("stack: secured ClickHouse DSN: %v", err)
	}
	opts.Auth.Password = s.ClickHousePassword
	opts.TLS = tlsConfig(t, s.ClickHouseCAFile)
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("stack: opening the secured ClickHouse: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
