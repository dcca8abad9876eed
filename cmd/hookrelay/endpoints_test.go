package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hookrelay/hookrelay/pipeline"
	"github.com/hookrelay/hookrelay/pipeline/endpoints"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func parseEndpointFlags(t *testing.T, create bool, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	endpointFlags(fs, create)
	if !create {
		fs.Duration("secret-overlap", 0, "")
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return fs
}

// TestEndpointFlagsRefuseEmptyAndInvalid: every flag given an empty or
// invalid value is refused, naming the flag (issue 8, item 8); nothing is
// silently defaulted or generated.
func TestEndpointFlagsRefuseEmptyAndInvalid(t *testing.T) {
	base := []string{"--id", "x", "--url", "https://hooks.example/in", "--secret", testSecret}
	tests := []struct {
		flag string
		args []string
	}{
		{"--secret", []string{"--secret", ""}},
		{"--secret", []string{"--secret", "   "}},
		{"--secret", []string{"--secret", "whsec_abc!"}},
		{"--secret", []string{"--secret", "whsec_AAECAwQFBgcICQoLDA0ODw=="}}, // 16 bytes
		{"--url", []string{"--url", ""}},
		{"--url", []string{"--url", "https://user:pass@hooks.example/in"}},
		{"--url", []string{"--url", "ftp://hooks.example/in"}},
		{"--url", []string{"--url", "http://2130706433/"}},
		{"--id", []string{"--id", ""}},
		{"--id", []string{"--id", "a/b"}},
		{"--events", []string{"--events", ""}},
		{"--events", []string{"--events", ","}},
		{"--events", []string{"--events", "a,,b"}},
		{"--events", []string{"--events", "a b"}},
		{"--tenant", []string{"--tenant", ""}},
		{"--tenant", []string{"--tenant", "a b"}},
		{"--rate", []string{"--rate", "0"}},
		{"--rate", []string{"--rate", "-1"}},
		{"--rate", []string{"--rate", "NaN"}},
		{"--rate", []string{"--rate", "+Inf"}},
		{"--rate", []string{"--rate", "20000"}},
		{"--max-in-flight", []string{"--max-in-flight", "0"}},
		{"--max-in-flight", []string{"--max-in-flight", "-3"}},
		{"--max-in-flight", []string{"--max-in-flight", "5000"}},
		{"--timeout", []string{"--timeout", "0s"}},
		{"--timeout", []string{"--timeout", "-1s"}},
		{"--timeout", []string{"--timeout", "5m"}},
		{"--connect-timeout", []string{"--connect-timeout", "0s"}},
		{"--connect-timeout", []string{"--connect-timeout", "-1s"}},
		{"--connect-timeout", []string{"--timeout", "2s", "--connect-timeout", "5s"}},
	}
	for _, tt := range tests {
		for _, create := range []bool{true, false} {
			args := append(append([]string{}, base...), tt.args...)
			fs := parseEndpointFlags(t, create, args...)
			var cur *endpoints.Endpoint
			if !create {
				cur = existingEndpoint()
			}
			err := checkEndpointFlags(fs, cur)
			if err == nil {
				t.Errorf("create=%v %q: accepted, want an error naming %s", create, tt.args, tt.flag)
				continue
			}
			if !strings.Contains(err.Error(), tt.flag) {
				t.Errorf("create=%v %q: error %q does not name %s", create, tt.args, err, tt.flag)
			}
		}
	}
	// The valid forms still pass.
	for _, args := range [][]string{
		base,
		{"--id", "x", "--url", "https://hooks.example/in"}, // add without --secret generates one
		append(append([]string{}, base...), "--events", "a.*,b", "--tenant", "t1", "--rate", "0.5", "--max-in-flight", "2", "--timeout", "5s", "--connect-timeout", "1s"),
	} {
		fs := parseEndpointFlags(t, true, args...)
		if err := checkEndpointFlags(fs, nil); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

func existingEndpoint() *endpoints.Endpoint {
	e := &endpoints.Endpoint{ID: "x", URL: "https://hooks.example/old", Secrets: []endpoints.Secret{{Value: endpoints.NewSecret()}}, EventTypes: []string{"*"}, Version: 3}
	e.SetDefaults()
	return e
}

// checkEndpointFlags is what add and update do before writing: build the
// endpoint from the flags, apply defaults, validate, name the flags.
func checkEndpointFlags(fs *pflag.FlagSet, cur *endpoints.Endpoint) error {
	e, _, err := endpointFromFlags(fs, cur)
	if err != nil {
		return err
	}
	e.SetDefaults()
	return flagErrors(e.Validate())
}

// TestRefuseEmptyFlags: every command's flags given empty are refused,
// naming the flag, except those whose empty value means "none".
func TestRefuseEmptyFlags(t *testing.T) {
	for _, tt := range []struct {
		cmd  func() *cobra.Command
		args []string
		want string // "" = accepted
	}{
		{publishCmd, []string{"--id", ""}, "--id"},
		{publishCmd, []string{"--source", " "}, "--source"},
		{publishCmd, []string{"--data", ""}, "--data"},
		{publishCmd, []string{"--topic-prefix", ""}, "--topic-prefix"},
		{publishCmd, []string{"--brokers", ""}, "--brokers"},
		{logCmd, []string{"--endpoint", ""}, "--endpoint"},
		{logCmd, []string{"--clickhouse", ""}, "--clickhouse"},
		{runCmd, []string{"--http-addr", ""}, "--http-addr"},
		{runCmd, []string{"--retry-schedule", ""}, "--retry-schedule"},
		{runCmd, []string{"--allow-networks", ""}, ""},
		{runCmd, []string{"--failing-notify-at", ""}, ""},
		{runCmd, []string{"--kafka-sasl-mechanism", ""}, ""},
		{publishCmd, []string{"--type", "a.b"}, ""},
	} {
		c := tt.cmd()
		if err := c.ParseFlags(tt.args); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		err := refuseEmptyFlags(c.Flags())
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s %q: %v, want accepted", c.Name(), tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s %q: %v, want an error naming %s", c.Name(), tt.args, err, tt.want)
		}
	}
}

// TestLoadConfigRefusesUnusable: values that would silently misbehave are
// refused at start-up, naming the flag.
func TestLoadConfigRefusesUnusable(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-addr", " "}, "--http-addr"},
		{[]string{"--topic-prefix", "a b/"}, "--topic-prefix"},
		{[]string{"--allow-networks", "127.0.0.1/33"}, "--allow-networks"},
		{[]string{"--disable-after", "0s"}, "--disable-after"},
		{[]string{"--disable-after", "3 days"}, "--disable-after"},
		{[]string{"--failing-notify-at", "0.5,0.4"}, "--failing-notify-at"},
		{[]string{"--failing-notify-at", "1"}, "--failing-notify-at"},
		{[]string{"--failing-notify-at", "half"}, "--failing-notify-at"},
		{[]string{"--attempt-format", "protobuf"}, "HOOKRELAY_ATTEMPT_FORMAT"},
		{[]string{"--attempt-format", "BINARY"}, "--attempt-format"},
	} {
		c := runCmd()
		if err := c.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(c.Flags()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error naming %s", tt.args, err, tt.want)
		}
	}
}

// TestAttemptFormatDefaultsToJSON: this release writes the attempts topic's
// JSON form unless told otherwise, so an audit sink of the release before
// (which skips binary records) loses nothing during a rolling upgrade.
func TestAttemptFormatDefaultsToJSON(t *testing.T) {
	t.Setenv("HOOKRELAY_ATTEMPT_FORMAT", "")
	os.Unsetenv("HOOKRELAY_ATTEMPT_FORMAT")
	for _, tt := range []struct {
		args []string
		want pipeline.AttemptFormat
	}{
		{nil, pipeline.AttemptJSON},
		{[]string{"--attempt-format", "binary"}, pipeline.AttemptBinary},
		{[]string{"--attempt-format", "json"}, pipeline.AttemptJSON},
	} {
		c := runCmd()
		if err := c.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(c.Flags())
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if cfg.AttemptFormat != tt.want {
			t.Errorf("%q: attempt format %q, want %q", tt.args, cfg.AttemptFormat, tt.want)
		}
	}
}
