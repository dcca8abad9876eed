package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// addEndpointAllowing registers ep with `hookrelay endpoints add` under the
// allow-list allow instead of the harness's: the CLI refuses an IP literal
// the SSRF guard refuses, so a test that wants such an endpoint in the
// topic (as another producer, or an operator with another allow-list, could
// write it) adds it this way.
func (h *harness) addEndpointAllowing(allow string, ep endpoint) {
	h.t.Helper()
	saved := h.env
	h.env = append(slices.Clone(saved), "HOOKRELAY_ALLOW_NETWORKS="+allow) // the last value wins (os/exec)
	defer func() { h.env = saved }()
	h.addEndpoint(ep)
}

// TestLogRedactsURLs (issue 8, item 7): a receiver answering 307 with a
// Location that carries userinfo, a token query and a fragment, and an
// endpoint whose own URL carries a token and refuses connections: neither
// the ClickHouse rows, nor the attempts-topic records, nor the DLQ records,
// nor hookrelay's log contain any of those secrets.
func TestLogRedactsURLs(t *testing.T) {
	const (
		locToken  = "loctok7f3a"
		locPass   = "locpw9c2e"
		locFrag   = "locfrag51d"
		epToken   = "eptok0b8d"
		epPass    = "eppw44e1"
		redacted  = "REDACTED"
		eventType = "redact.thing"
	)
	secrets := []string{locToken, locPass, locFrag, epToken, epPass}
	h := newHarness(t, config{RetrySchedule: "1s,1s"})
	location := "http://leak:" + locPass + "@127.0.0.1:17199/internal?token=" + locToken + "#" + locFrag
	redir := newReceiver(t, "redir", func(*request) answer {
		return answer{Status: http.StatusTemporaryRedirect, Header: http.Header{"Location": {location}}}
	})
	closed := "http://127.0.0.1:" + strings.Split(freeAddr(t), ":")[1] + "/in?token=" + epToken
	h.addEndpoint(endpoint{ID: "redir", URL: redir.URL + "?token=" + epToken, Secret: redir.Secret, Events: []string{eventType}})
	h.addEndpoint(endpoint{ID: "refused", URL: closed, Secret: newSecret(), Events: []string{eventType}})
	p := h.start("redact-1")
	h.produce(h.events([]cloudEvent{{ID: "redact-0", Source: "urn:e2e:redact", Type: eventType, Time: time.Now(), Data: eventData{Event: "redact-0"}}})...)

	// One failed row for the redirect, three for the refused endpoint (the
	// last exhausted); both deliveries end in the DLQ.
	rows := h.waitAttempts(90*time.Second, "the final rows", func(rows []attemptRow) (bool, string) {
		final := 0
		for _, r := range rows {
			if r.Outcome != "retry_scheduled" {
				final++
			}
		}
		return final >= 2, fmt.Sprintf("%d rows, %d final", len(rows), final)
	})
	if n := redir.Count(); n != 1 {
		t.Errorf("redirecting receiver got %d requests, want 1", n)
	}

	// ClickHouse: every free-text column of every row.
	conn := stack.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := conn.Query(ctx, `SELECT endpoint_id, outcome, error_class, error_message, response_body, url_host FROM `+h.db+`.attempts FINAL`)
	if err != nil {
		t.Fatalf("query attempts: %v", err)
	}
	nRows := 0
	var redirMsg string
	for q.Next() {
		var ep, outcome, class, msg, body, host string
		if err := q.Scan(&ep, &outcome, &class, &msg, &body, &host); err != nil {
			t.Fatalf("scan: %v", err)
		}
		nRows++
		for _, s := range secrets {
			if strings.Contains(msg+body+host, s) {
				t.Errorf("ClickHouse row of %s (%s, %s) leaks %q: error_message %q, url_host %q", ep, outcome, class, s, msg, host)
			}
		}
		if ep == "redir" {
			redirMsg = msg
		}
	}
	q.Close()
	if nRows != len(rows) || nRows < 4 {
		t.Errorf("%d ClickHouse rows, want %d (at least 4)", nRows, len(rows))
	}
	// The row still says where the redirect pointed, minus the secrets.
	if want := "Location: http://" + redacted + "@127.0.0.1:17199/internal?" + redacted + "#" + redacted; !strings.Contains(redirMsg, want) {
		t.Errorf("redirect row error_message %q does not contain %q", redirMsg, want)
	}

	// The attempts topic and the DLQ: values and every header.
	for _, topic := range []string{"attempts", "dlq"} {
		want := nRows
		if topic == "dlq" {
			want = 2
		}
		recs := h.readTopic(h.topic(topic), 30*time.Second, func(got []*kgo.Record) (bool, string) {
			return len(got) >= want, fmt.Sprintf("%d of %d records", len(got), want)
		})
		for _, r := range recs {
			text := string(r.Value)
			for _, hd := range r.Headers {
				text += "\n" + hd.Key + "=" + string(hd.Value)
			}
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("%s record at offset %d leaks %q: %s", topic, r.Offset, s, text)
				}
			}
		}
	}

	// hookrelay's own log.
	p.stop()
	logText, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(logText), s) {
			t.Errorf("hookrelay's log leaks %q", s)
		}
	}
}

// TestCLIRefusesUnusableEndpoints (issue 8, items 8 and 10): `endpoints add`
// exits non-zero, naming the flag and the reason, for an empty secret, an
// unusable secret, credentials in the URL, and an IP literal in a refused
// range in any spelling (no allow-list); nothing is written.
func TestCLIRefusesUnusableEndpoints(t *testing.T) {
	h := newHarness(t, config{NoAllowList: true})
	base := []string{"endpoints", "add", "--id", "bad", "--events", "*"}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--url", "https://hooks.example/in", "--secret", ""}, []string{"--secret", "empty"}},
		{[]string{"--url", "https://hooks.example/in", "--secret", "whsec_abc!"}, []string{"--secret", "base64"}},
		{[]string{"--url", "https://hooks.example/in", "--secret", "whsec_AAECAwQFBgcICQoLDA0ODw=="}, []string{"--secret", "16 bytes"}},
		{[]string{"--url", "https://user:pass@hooks.example/in"}, []string{"--url", "credentials"}},
		{[]string{"--url", "http://[::ffff:127.0.0.1]:8080/"}, []string{"--url", "loopback"}},
		{[]string{"--url", "http://2130706433/"}, []string{"--url", "loopback"}},
		{[]string{"--url", "http://0x7f.1/"}, []string{"--url", "127.0.0.1"}},
		{[]string{"--url", "http://169.254.169.254/latest"}, []string{"--url", "link-local"}},
		{[]string{"--url", "https://hooks.example/in", "--rate", "0"}, []string{"--rate"}},
		{[]string{"--url", "https://hooks.example/in", "--timeout", "0s"}, []string{"--timeout"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		out, err := h.command(ctx, append(slices.Clone(base), tt.args...)...).CombinedOutput()
		cancel()
		if err == nil {
			t.Errorf("endpoints add %q: exit 0, want an error\n%s", tt.args, out)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("endpoints add %q: output does not contain %q:\n%s", tt.args, w, out)
			}
		}
		if strings.Contains(string(out), "pass@") {
			t.Errorf("endpoints add %q: output repeats the credentials:\n%s", tt.args, out)
		}
	}
	if out := h.cli("endpoints", "list"); strings.Contains(out, "bad") {
		t.Errorf("a refused endpoint was written:\n%s", out)
	}
}
