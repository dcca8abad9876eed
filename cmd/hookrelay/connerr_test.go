package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestKafkaConfigError: each TLS or SASL misconfiguration is named with
// its setting; a broker that is down, a timeout or a retriable Kafka error
// is not one (nil: retry).
func TestKafkaConfigError(t *testing.T) {
	c := &config{TLS: true, TLSCAFile: "/etc/ca.pem", SASLMechanism: "SCRAM-SHA-512", SASLUser: "hookrelay"}
	refused := fmt.Errorf("unable to dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	for _, tc := range []struct {
		name string
		err  error
		eofs int
		want string // "" for nil
	}{
		{"sasl", fmt.Errorf("x: %w", kerr.SaslAuthenticationFailed), 0, "kafka: SASL authentication failed (SCRAM-SHA-512, user hookrelay)"},
		{"mechanism", kerr.UnsupportedSaslMechanism, 0, "does not offer SASL mechanism SCRAM-SHA-512"},
		{"unknown CA", fmt.Errorf("unable to dial: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), 0,
			"kafka: TLS: certificate signed by unknown authority (HOOKRELAY_KAFKA_TLS_CA=/etc/ca.pem)"},
		{"hostname", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "10.0.0.1"}, 0, "not valid for its address"},
		{"not TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, 0, "does not speak TLS on this port"},
		{"refused", refused, 0, ""},
		{"timeout", fmt.Errorf("topics: %w", errors.New("context deadline exceeded")), 0, ""},
		{"retriable", kerr.NotController, 0, ""},
		{"nil", nil, 0, ""},
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
