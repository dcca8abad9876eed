package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaConfigError: each TLS or SASL misconfiguration is named with
// its setting; a broker that is down, a timeout or a retriable Kafka error
// is not one (nil: retry).
func TestKafkaConfigError(t *testing.T) {
	c := &config{TLS: true, TLSCAFile: "/etc/ca.pem", SASLMechanism: "SCRAM-SHA-512", SASLUser: "hookrelay"}
	refused := fmt.Errorf("unable to dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	eof := fmt.Errorf("topics: %w", &kgo.ErrFirstReadEOF{})
	for _, tc := range []struct {
		name string
		err  error
		eofs eofStreak
		want string // "" for nil
	}{
		{"sasl", fmt.Errorf("x: %w", kerr.SaslAuthenticationFailed), eofStreak{}, "kafka: SASL authentication failed (SCRAM-SHA-512, user hookrelay)"},
		{"mechanism", kerr.UnsupportedSaslMechanism, eofStreak{}, "does not offer SASL mechanism SCRAM-SHA-512"},
		{"unknown CA", fmt.Errorf("unable to dial: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), eofStreak{},
			"kafka: TLS: certificate signed by unknown authority (HOOKRELAY_KAFKA_TLS_CA=/etc/ca.pem)"},
		{"hostname", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "10.0.0.1"}, eofStreak{}, "not valid for its address"},
		{"not TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, eofStreak{}, "does not speak TLS on this port"},
		{"refused", refused, eofStreak{}, ""},
		{"timeout", fmt.Errorf("topics: %w", errors.New("context deadline exceeded")), eofStreak{}, ""},
		{"retriable", kerr.NotController, eofStreak{}, ""},
		{"nil", nil, eofStreak{}, ""},
		{"one EOF", eof, eofStreak{Tries: 1}, ""},
		// A load balancer in front of restarting brokers, or a connection
		// quota: several closes in a few seconds are not a mismatch yet.
		{"EOFs for seconds", eof, eofStreak{Tries: 3, For: 3 * time.Second}, ""},
		{"EOFs for 29s", eof, eofStreak{Tries: 6, For: 29 * time.Second}, ""},
		{"one long EOF try", eof, eofStreak{Tries: 1, For: time.Minute}, ""},
		{"only EOFs for 30s", eof, eofStreak{Tries: 6, For: 31 * time.Second}, "kafka: the broker closes every new connection at once (6 tries over 31s)"},
	} {
		got := c.kafkaConfigError(tc.err, tc.eofs)
		if tc.want == "" {
			if got != nil {
				t.Errorf("%s: kafkaConfigError(%v) = %v; want nil (retry)", tc.name, tc.err, got)
			}
			continue
		}
		if got == nil || !strings.Contains(got.Error(), tc.want) || !errors.Is(got, tc.err) {
			t.Errorf("%s: kafkaConfigError(%v) = %v; want it to contain %q and wrap the cause", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestClickHouseConfigError: refused credentials (18.16's 192, 193, 194
// and current releases' 516) and certificate problems are named; a server
// that is down or another exception is not (nil: retry).
func TestClickHouseConfigError(t *testing.T) {
	c := &config{ClickHouseDSN: "clickhouse://hookrelay@127.0.0.1:9440/db?secure=true", ClickHouseTLSCA: "/ca.pem"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"wrong password", &clickhouse.Exception{Code: 193, Message: "Wrong password for user hookrelay"}, "clickhouse: authentication failed for user hookrelay"},
		{"unknown user", fmt.Errorf("ping: %w", &clickhouse.Exception{Code: 192}), "authentication failed for user hookrelay"},
		{"new releases", &clickhouse.Exception{Code: 516}, "authentication failed"},
		{"unknown CA", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "clickhouse: TLS: certificate signed by unknown authority (HOOKRELAY_CLICKHOUSE_TLS_CA=/ca.pem)"},
		{"not TLS", tls.RecordHeaderError{}, "does not speak TLS"},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, ""},
		{"other exception", &clickhouse.Exception{Code: 241, Message: "Memory limit"}, ""},
	} {
		got := c.clickhouseConfigError(tc.err)
		if tc.want == "" {
			if got != nil {
				t.Errorf("%s: clickhouseConfigError(%v) = %v; want nil (retry)", tc.name, tc.err, got)
			}
			continue
		}
		if got == nil || !strings.Contains(got.Error(), tc.want) {
			t.Errorf("%s: clickhouseConfigError(%v) = %v; want it to contain %q", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestClickHouseSettings: the CA file needs secure=true in the DSN (the
// error names the flag); with it, storeOptions carries the password and a
// TLS configuration trusting that file only.
func TestClickHouseSettings(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(args ...string) (*config, error) {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		addFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return loadConfig(fs)
	}
	if _, err := load("--clickhouse", "clickhouse://u@h:9000/db", "--clickhouse-tls-ca", ca); err == nil ||
		!strings.Contains(err.Error(), "--clickhouse-tls-ca (HOOKRELAY_CLICKHOUSE_TLS_CA)") || !strings.Contains(err.Error(), "secure=true") {
		t.Errorf("CA without secure=true: %v; want an error naming --clickhouse-tls-ca and secure=true", err)
	}
	c, err := load("--clickhouse", "clickhouse://u@h:9440/db?secure=true", "--clickhouse-tls-ca", ca, "--clickhouse-password", "pw")
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.storeOptions()
	if err != nil {
		t.Fatal(err)
	}
	if o.Password != "pw" || o.TLS == nil || o.TLS.RootCAs == nil || o.TLS.RootCAs.Equal(x509.NewCertPool()) {
		t.Errorf("storeOptions = password %q, TLS %+v; want pw and the CA file's pool", o.Password, o.TLS)
	}
	c.ClickHouseTLSCA = filepath.Join(t.TempDir(), "missing.pem")
	if _, err := c.storeOptions(); err == nil || !strings.Contains(err.Error(), "--clickhouse-tls-ca") {
		t.Errorf("missing CA file: %v; want an error naming --clickhouse-tls-ca", err)
	}
}
