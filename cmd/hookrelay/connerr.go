package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Connection errors that no retry cures: wrong credentials, an untrusted or
// mismatched certificate, TLS against a port that does not speak it. At
// start-up they end the process (exit 1) with a message naming the setting
// to fix, instead of being retried like a cluster that is merely down
// (issue 10: an unreachable broker is waited for; issue 16: a wrong password
// or an untrusted CA fails at once and says which).

// kgo.ErrFirstReadEOF (the broker closed a new connection at once) counts as
// misconfiguration (TLS against a plaintext listener, or no SASL where the
// listener requires it) only when every start-up try for at least
// kafkaFirstEOFSpan, and at least kafkaFirstEOFTries of them, ended in it
// with nothing else between. A broker going down, a load balancer in front
// of restarting brokers, or a connection quota close connections the same
// way for a while; 30 s of nothing but such closes, with franz-go trying the
// seed brokers in turn on every try, is past what a restart looks like.
const (
	kafkaFirstEOFTries = 3
	kafkaFirstEOFSpan  = 30 * time.Second
)

// eofStreak is how many start-up tries in a row ended in
// kgo.ErrFirstReadEOF, and for how long (since the first of them).
type eofStreak struct {
	Tries int
	For   time.Duration
}

// misconfigured reports whether the streak is long enough to call the
// closes a TLS/SASL mismatch (see kafkaFirstEOFSpan).
func (s eofStreak) misconfigured() bool {
	return s.Tries >= kafkaFirstEOFTries && s.For >= kafkaFirstEOFSpan
}

// kafkaConfigError returns the error that explains err as a Kafka TLS or
// SASL misconfiguration of c, naming the settings, or nil when err is not
// one (a broker that is down, a timeout: retry). eofs is the streak of
// tries that ended in kgo.ErrFirstReadEOF, this one included.
func (c *config) kafkaConfigError(err error, eofs eofStreak) error {
	if err == nil {
		return nil
	}
	ca := "system roots"
	if c.TLSCAFile != "" {
		ca = "HOOKRELAY_KAFKA_TLS_CA=" + c.TLSCAFile
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		header    tls.RecordHeaderError
		firstEOF  *kgo.ErrFirstReadEOF
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("kafka: SASL authentication failed (%s, user %s): check --kafka-sasl-user and --kafka-sasl-password (HOOKRELAY_KAFKA_SASL_USER, HOOKRELAY_KAFKA_SASL_PASSWORD): %w", c.SASLMechanism, c.SASLUser, err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("kafka: the broker's listener does not offer SASL mechanism %s (--kafka-sasl-mechanism, HOOKRELAY_KAFKA_SASL_MECHANISM): %w", c.SASLMechanism, err)
	case errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("kafka: SASL refused by the broker's listener (--kafka-sasl-mechanism %q, HOOKRELAY_KAFKA_SASL_MECHANISM): %w", c.SASLMechanism, err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("kafka: TLS: certificate signed by unknown authority (%s): %w", ca, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("kafka: TLS: the broker's certificate is not valid for its address (--brokers, HOOKRELAY_BROKERS): %w", err)
	case errors.As(err, &invalid), errors.As(err, &verify):
		return fmt.Errorf("kafka: TLS: the broker's certificate is not accepted (%s): %w", ca, err)
	case errors.As(err, &header):
		return fmt.Errorf("kafka: TLS: the broker does not speak TLS on this port (--kafka-tls, HOOKRELAY_KAFKA_TLS; --brokers): %w", err)
	case errors.As(err, &firstEOF) && eofs.misconfigured():
		return fmt.Errorf("kafka: the broker closes every new connection at once (%d tries over %v): TLS or SASL do not match its listener (HOOKRELAY_KAFKA_TLS=%t, HOOKRELAY_KAFKA_SASL_MECHANISM=%q; --brokers): %w", eofs.Tries, eofs.For.Round(time.Second), c.TLS, c.SASLMechanism, err)
	}
	return nil
}

// explainKafka is err, or what kafkaConfigError makes of it, for a command
// that tries once (the CLI): a single kgo.ErrFirstReadEOF counts.
func (c *config) explainKafka(err error) error {
	if ferr := c.kafkaConfigError(err, eofStreak{Tries: kafkaFirstEOFTries, For: kafkaFirstEOFSpan}); ferr != nil {
		return ferr
	}
	return err
}

// ClickHouse exception codes that mean the credentials are refused
// (ErrorCodes.cpp of 18.16 and of current releases).
const (
	chUnknownUser          = 192
	chWrongPassword        = 193
	chRequiredPassword     = 194
	chIPAddressNotAllowed  = 195
	chAuthenticationFailed = 516
)

// clickhouseConfigError returns the error that explains err as a
// ClickHouse credential or TLS misconfiguration of c, naming the settings,
// or nil when err is not one (a server that is down: retry).
func (c *config) clickhouseConfigError(err error) error {
	if err == nil {
		return nil
	}
	user := "default"
	if u, perr := url.Parse(c.ClickHouseDSN); perr == nil && u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	ca := "system roots"
	if c.ClickHouseTLSCA != "" {
		ca = "HOOKRELAY_CLICKHOUSE_TLS_CA=" + c.ClickHouseTLSCA
	}
	var (
		ex        *clickhouse.Exception
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		header    tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &ex) && (ex.Code == chUnknownUser || ex.Code == chWrongPassword || ex.Code == chRequiredPassword || ex.Code == chAuthenticationFailed):
		return fmt.Errorf("clickhouse: authentication failed for user %s: check the DSN's user and password (--clickhouse, HOOKRELAY_CLICKHOUSE) or --clickhouse-password (HOOKRELAY_CLICKHOUSE_PASSWORD): %w", user, err)
	case errors.As(err, &ex) && ex.Code == chIPAddressNotAllowed:
		return fmt.Errorf("clickhouse: user %s may not connect from this address (the server's users.xml networks): %w", user, err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("clickhouse: TLS: certificate signed by unknown authority (%s): %w", ca, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("clickhouse: TLS: the server's certificate is not valid for its address (--clickhouse, HOOKRELAY_CLICKHOUSE): %w", err)
	case errors.As(err, &invalid), errors.As(err, &verify):
		return fmt.Errorf("clickhouse: TLS: the server's certificate is not accepted (%s): %w", ca, err)
	case errors.As(err, &header):
		return fmt.Errorf("clickhouse: TLS: the server does not speak TLS on this port (secure=true in --clickhouse wants the secure native port, 9440 by default): %w", err)
	}
	return nil
}
