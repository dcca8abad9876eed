package webhook_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		host      string
		addr      string // "" = a name (or an error without an address)
		canonical bool
		err       bool
	}{
		// names
		{"hooks.example", "", true, false},
		{"localhost", "", true, false},
		{"1.2.3.example", "", true, false},
		{"0x7f.example", "", true, false},
		{"123abc", "", true, false},
		{"a.0xg", "", true, false},
		{"bücher.example", "", true, false},
		// canonical literals
		{"127.0.0.1", "127.0.0.1", true, false},
		{"8.8.8.8", "8.8.8.8", true, false},
		{"0.0.0.0", "0.0.0.0", true, false},
		{"::1", "::1", true, false},
		{"::ffff:127.0.0.1", "::ffff:127.0.0.1", true, false},
		{"::ffff:7f00:1", "::ffff:127.0.0.1", true, false},
		{"::127.0.0.1", "::7f00:1", true, false},
		{"64:ff9b::7f00:1", "64:ff9b::7f00:1", true, false},
		{"fe80::1%eth0", "fe80::1%eth0", true, false},
		// IPv4 spellings Go's resolver reads as names
		{"2130706433", "127.0.0.1", false, true},
		{"0x7f000001", "127.0.0.1", false, true},
		{"0X7F000001", "127.0.0.1", false, true},
		{"017700000001", "127.0.0.1", false, true},
		{"0177.0.0.1", "127.0.0.1", false, true},
		{"0177.0.0.01", "127.0.0.1", false, true},
		{"0x7f.1", "127.0.0.1", false, true},
		{"0x7f.0x0.0x0.0x1", "127.0.0.1", false, true},
		{"127.1", "127.0.0.1", false, true},
		{"127.0.1", "127.0.0.1", false, true},
		{"127.0.0.1.", "127.0.0.1", false, true},
		{"2130706433.", "127.0.0.1", false, true},
		{"127.000.000.001", "127.0.0.1", false, true},
		{"0000000000000000177.0.0.1", "127.0.0.1", false, true},
		{"0x", "0.0.0.0", false, true},
		{"0", "0.0.0.0", false, true},
		{"169.254.43518", "169.254.169.254", false, true},
		{"0xa9fea9fe", "169.254.169.254", false, true},
		{"10.1", "10.0.0.1", false, true},
		{"0127.0.0.1", "87.0.0.1", false, true}, // octal 0127
		{"134744072", "8.8.8.8", false, true},
		{"１２７.０.０.１", "127.0.0.1", false, true}, // fullwidth digits (IDNA maps them)
		{"127。0。0。1", "127.0.0.1", false, true}, // ideographic full stops
		// end in a number but are no address: never dialable
		{"1.2.3.4.5", "", false, true},
		{"256.0.0.1", "", false, true},
		{"1.2.3.256", "", false, true},
		{"1.2.65536", "", false, true},
		{"4294967296", "", false, true},
		{"0x100000000", "", false, true},
		{"08.0.0.1", "", false, true},
		{"1.0x", "1.0.0.0", false, true}, // "0x" is 0
		{"x0x7f.1", "", false, true},     // ends in a number, so it must be an address (WHATWG)
		{"127..1", "", false, true},
		{"99999999999999999999999", "", false, true},
		// names Go's resolver never looks up
		{"a..b", "", false, true},
		{"-x.example", "", false, true},
		{"x-.example", "", false, true},
		{"a!b.example", "", false, true},
		{"a$b", "", false, true},
		{"xn--", "", false, true},
		{"my_host.example", "", true, false},
		{"hooks.example.", "", true, false},
		{"a.b.c.d.e.f.example", "", true, false},
		// invalid IPv6
		{"::ffff:127.0.0.1.", "", false, true},
		{"1:2:3", "", false, true},
		{"", "", false, true},
	}
	tests = append(tests,
		struct {
			host      string
			addr      string
			canonical bool
			err       bool
		}{strings.Repeat("a", 64) + ".example", "", false, true},
		struct {
			host      string
			addr      string
			canonical bool
			err       bool
		}{strings.Repeat("a.", 127) + "b", "", false, true},
	)
	for _, tt := range tests {
		h, err := webhook.ParseHost(tt.host)
		if (err != nil) != tt.err {
			t.Errorf("ParseHost(%q) error = %v, want error %v", tt.host, err, tt.err)
		}
		if err != nil {
			var he *webhook.HostError
			if !errors.As(err, &he) {
				t.Errorf("ParseHost(%q) error %T, want *HostError", tt.host, err)
			}
		}
		got := ""
		if h.IsIP() {
			got = h.Addr.String()
		}
		if got != tt.addr {
			t.Errorf("ParseHost(%q) addr = %q, want %q", tt.host, got, tt.addr)
		}
		if err == nil && h.Canonical != tt.canonical {
			t.Errorf("ParseHost(%q) canonical = %v, want %v", tt.host, h.Canonical, tt.canonical)
		}
	}
}

// TestCheckHost: every spelling of a refused address is blocked, before any
// lookup, with the guard's reason; the allow-list applies to the address it
// spells; a non-canonical spelling of an allowed or global address is a
// *HostError.
func TestCheckHost(t *testing.T) {
	lo := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	tests := []struct {
		host   string
		allow  []netip.Prefix
		reason string // BlockedError reason; "host" = a *HostError; "" = nil
	}{
		{"hooks.example", nil, ""},
		{"8.8.8.8", nil, ""},
		{"127.0.0.1", nil, "loopback"},
		{"127.0.0.1", lo, ""},
		{"::ffff:127.0.0.1", nil, "loopback"},
		{"::ffff:127.0.0.1", lo, ""},
		{"::ffff:7f00:1", nil, "loopback"},
		{"::127.0.0.1", nil, "ipv4-compatible"},
		{"::1", nil, "loopback"},
		{"::1%lo", nil, "loopback"},
		{"fe80::1%eth0", nil, "link-local"},
		{"64:ff9b::7f00:1", nil, "loopback"}, // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", nil, "link-local"},
		{"64:ff9b::808:808", nil, ""}, // NAT64 of 8.8.8.8
		{"::ffff:0:7f00:1", nil, "ipv4-translated"},
		{"2130706433", nil, "loopback"},
		{"2130706433", lo, "host"},
		{"0177.0.0.1", nil, "loopback"},
		{"0x7f.1", nil, "loopback"},
		{"127.1", nil, "loopback"},
		{"127.1", lo, "host"},
		{"127.0.0.1.", nil, "loopback"},
		{"0", nil, "unspecified"},
		{"0x", nil, "unspecified"},
		{"0xa9fea9fe", nil, "link-local"},
		{"169.254.43518", nil, "link-local"},
		{"012.0.0.1", nil, "private"},
		{"0xc0a80001", nil, "private"},
		{"１２７.０.０.１", nil, "loopback"},
		{"134744072", nil, "host"}, // 8.8.8.8, but no resolver agrees on it
		{"256.0.0.1", nil, "host"},
		{"1.2.3.4.5", nil, "host"},
	}
	for _, tt := range tests {
		err := webhook.CheckHost(tt.host, tt.allow)
		var be *webhook.BlockedError
		var he *webhook.HostError
		switch {
		case tt.reason == "":
			if err != nil {
				t.Errorf("CheckHost(%q, %v) = %v, want nil", tt.host, tt.allow, err)
			}
		case tt.reason == "host":
			if !errors.As(err, &he) {
				t.Errorf("CheckHost(%q, %v) = %v, want a *HostError", tt.host, tt.allow, err)
			}
		default:
			if !errors.As(err, &be) || be.Reason != tt.reason {
				t.Errorf("CheckHost(%q, %v) = %v, want blocked (%s)", tt.host, tt.allow, err, tt.reason)
			}
		}
	}
}
