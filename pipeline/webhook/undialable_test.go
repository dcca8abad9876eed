package webhook_test

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/hookrelay/hookrelay/audit"
	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// TestSendNumericHostSpellingsArePermanent: an IP literal in a spelling the
// Go resolver treats as a name (decimal, octal, hex, short forms, trailing
// dot) or a host that cannot be a name at all is never retried through the
// schedule (issue 8, item 10): it is blocked when the address it spells is
// refused, else failed.
func TestSendNumericHostSpellingsArePermanent(t *testing.T) {
	srv, ln := newServer(t, nil)
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	guarded := newSender(t, webhook.Options{})
	allowed := newSender(t, webhook.Options{AllowNetworks: loopback})
	for _, host := range []string{
		"2130706433", "0x7f000001", "017700000001", "0177.0.0.1", "0x7f.1", "0x7F.0.0.1", "127.1", "127.0.1",
		"127.0.0.1.", "2130706433.", "0000000000000000177.0.0.1", "127.000.000.001",
		"1.2.3.4.5", "256.0.0.1", "08.0.0.1", "0x100000000", "1.0x", "4294967296",
		"a..b", "-x.example", "a!b.example", "x_-.example", "１２７.０.０.１",
	} {
		u := "http://" + host + ":" + port + "/"
		for name, s := range map[string]*webhook.Sender{"no allow-list": guarded, "127.0.0.0/8 allowed": allowed} {
			res := s.Send(context.Background(), testRequest(t, u))
			c := webhook.Classify(res)
			if c.Retryable || (c.Outcome != audit.Blocked && c.Outcome != audit.Failed) {
				t.Errorf("%s, %s: Classify = %+v (err %v), want blocked or failed, not retried", name, u, c, res.Err)
			}
		}
	}
	if n := ln.accepts.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want 0", n)
	}
}
