package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func try(name string, opts ...kgo.Opt) {
	cl, _ := kgo.NewClient(opts...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := kadm.NewClient(cl).ListTopics(ctx)
	var ua x509.UnknownAuthorityError
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	fmt.Printf("%s: %v in %v\n  %T sasl=%v ua=%v rh=%v cv=%v retr=%v\n", name, err, time.Since(start), err, errors.Is(err, kerr.SaslAuthenticationFailed), errors.As(err, &ua), errors.As(err, &rh), errors.As(err, &cv), kerr.IsRetriable(err))
	for e := err; e != nil; e = errors.Unwrap(e) {
		fmt.Printf("   chain %T\n", e)
	}
}

func main() {
	pem, _ := os.ReadFile("/tmp/sec-stack/secure/ca.pem")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	pw, _ := os.ReadFile("/tmp/sec-stack/secure/kafka.password")
	good := scram.Auth{User: "hookrelay", Pass: string(pw[:len(pw)-1])}
	tlsOK := kgo.DialTLSConfig(&tls.Config{RootCAs: pool})
	sec := kgo.SeedBrokers("127.0.0.1:29096")
	try("good", sec, tlsOK, kgo.SASL(good.AsSha512Mechanism()))
	try("badpw", sec, tlsOK, kgo.SASL(scram.Auth{User: "hookrelay", Pass: "x"}.AsSha512Mechanism()))
	try("baduser", sec, tlsOK, kgo.SASL(scram.Auth{User: "nobody", Pass: "x"}.AsSha512Mechanism()))
	try("sha256", sec, tlsOK, kgo.SASL(good.AsSha256Mechanism()))
	try("untrusted", sec, kgo.DialTLSConfig(&tls.Config{}), kgo.SASL(good.AsSha512Mechanism()))
	try("tls-to-plain", kgo.SeedBrokers("127.0.0.1:29092"), tlsOK)
	try("no-sasl", sec, tlsOK)
	try("down", kgo.SeedBrokers("127.0.0.1:29999"), tlsOK, kgo.SASL(good.AsSha512Mechanism()))
	chpw, _ := os.ReadFile("/tmp/sec-stack/secure/clickhouse.password")
	for _, c := range []struct{ name, dsn string; tc *tls.Config }{
		{"ch good", "clickhouse://hookrelay:" + string(chpw[:len(chpw)-1]) + "@127.0.0.1:29440/default", &tls.Config{RootCAs: pool}},
		{"ch badpw", "clickhouse://hookrelay:x@127.0.0.1:29440/default", &tls.Config{RootCAs: pool}},
		{"ch baduser", "clickhouse://nobody:x@127.0.0.1:29000/default", nil},
		{"ch untrusted", "clickhouse://hookrelay:x@127.0.0.1:29440/default", &tls.Config{}},
		{"ch tls-to-plain", "clickhouse://hookrelay:x@127.0.0.1:29000/default", &tls.Config{RootCAs: pool}},
		{"ch down", "clickhouse://hookrelay:x@127.0.0.1:29998/default", nil},
	} {
		o, _ := clickhouse.ParseDSN(c.dsn)
		o.TLS = c.tc
		o.DialTimeout = 3 * time.Second
		conn, _ := clickhouse.Open(o)
		start := time.Now()
		err := conn.Ping(context.Background())
		var ex *clickhouse.Exception
		isEx := errors.As(err, &ex)
		code := int32(0)
		if isEx {
			code = ex.Code
		}
		fmt.Printf("%s: %v in %v ex=%v code=%d\n", c.name, err, time.Since(start), isEx, code)
		for e := err; e != nil; e = errors.Unwrap(e) {
			fmt.Printf("   chain %T\n", e)
		}
		conn.Close()
	}
}
