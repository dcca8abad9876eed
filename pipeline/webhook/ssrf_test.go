package webhook

import (
	"net/netip"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	tests := []struct {
		addr   string
		allow  string
		reason string // "" = allowed
	}{
		// global unicast: allowed
		{"93.184.215.14", "", ""},
		{"8.8.8.8", "", ""},
		{"2606:4700::1111", "", ""},
		{"::ffff:93.184.215.14", "", ""},
		{"64:ff9b::5db8:d70e", "", ""}, // NAT64 of 93.184.215.14
		// loopback, incl. IPv4-mapped and zoned forms
		{"127.0.0.1", "", "loopback"},
		{"127.255.255.254", "", "loopback"},
		{"::1", "", "loopback"},
		{"::ffff:127.0.0.1", "", "loopback"},
		{"::ffff:7f00:1", "", "loopback"},
		// private
		{"10.0.0.1", "", "private"},
		{"172.16.0.1", "", "private"},
		{"172.31.255.255", "", "private"},
		{"192.168.1.1", "", "private"},
		{"::ffff:10.1.2.3", "", "private"},
		{"fc00::1", "", "private"},
		{"fd12:3456::1", "", "private"},
		// link-local (cloud metadata)
		{"169.254.169.254", "", "link-local"},
		{"fe80::1", "", "link-local"},
		{"fe80::1%eth0", "", "link-local"},
		// CGNAT, unspecified, broadcast, multicast, reserved
		{"100.64.0.1", "", "cgnat"},
		{"100.127.255.255", "", "cgnat"},
		{"0.0.0.0", "", "unspecified"},
		{"0.1.2.3", "", "this-network"},
		{"::", "", "unspecified"},
		{"255.255.255.255", "", "broadcast"},
		{"224.0.0.1", "", "multicast"},
		{"239.255.255.250", "", "multicast"},
		{"ff02::1", "", "multicast"},
		{"ff05::2", "", "multicast"},
		{"240.0.0.1", "", "reserved"},
		// documentation and benchmarking
		{"192.0.2.1", "", "documentation"},
		{"198.51.100.7", "", "documentation"},
		{"203.0.113.200", "", "documentation"},
		{"2001:db8::1", "", "documentation"},
		{"3fff::1", "", "documentation"},
		{"198.18.0.1", "", "benchmarking"},
		{"198.19.255.255", "", "benchmarking"},
		{"192.0.0.8", "", "ietf-protocol"},
		// IPv6 transition forms that reach IPv4
		{"64:ff9b::7f00:1", "", "loopback"},      // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", "", "link-local"}, // NAT64 of 169.254.169.254
		{"64:ff9b:1::a00:1", "", "nat64-local"},
		{"::7f00:1", "", "ipv4-compatible"},
		{"2002:7f00:1::1", "", "6to4"},
		{"2001:0:4136:e378::1", "", "ietf-protocol"}, // Teredo
		{"::ffff:0:7f00:1", "", "ipv4-translated"},
		{"100::1", "", "discard"},
		{"fec0::1", "", "site-local"},
		// allow-list
		{"127.0.0.1", "127.0.0.0/8", ""},
		{"::ffff:127.0.0.1", "127.0.0.0/8", ""},
		{"127.0.0.1", "::ffff:127.0.0.0/104", ""},
		{"::1", "127.0.0.0/8", "loopback"},
		{"::1", "::1", ""},
		{"10.2.3.4", "10.2.0.0/16", ""},
		{"10.3.3.4", "10.2.0.0/16", "private"},
		{"64:ff9b::7f00:1", "127.0.0.1/32", ""},
		{"169.254.169.254", "0.0.0.0/0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr+"/"+tt.allow, func(t *testing.T) {
			allow, err := ParseAllowList(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			a := netip.MustParseAddr(tt.addr)
			blocked, reason := IsBlocked(a, allow)
			if blocked != (tt.reason != "") || reason != tt.reason {
				t.Errorf("IsBlocked(%s, %q) = %v %q, want reason %q", tt.addr, tt.allow, blocked, reason, tt.reason)
			}
			g := guard{allow: maskAll(allow)}
			if err := g.check(a); (err != nil) != blocked {
				t.Errorf("guard.check disagrees with IsBlocked: %v", err)
			} else if err != nil && (err.(*BlockedError).Addr != a || !strings.Contains(err.Error(), a.String())) {
				t.Errorf("BlockedError = %+v, want Addr %s", err, a)
			}
		})
	}
}

func TestParseAllowList(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"", nil, ""},
		{"  ", nil, ""},
		{"127.0.0.0/8", []string{"127.0.0.0/8"}, ""},
		{"127.0.0.0/8, ::1/128 10.1.2.3/8,,", []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8"}, ""},
		{"192.168.1.5", []string{"192.168.1.5/32"}, ""},
		{"fd00::1", []string{"fd00::1/128"}, ""},
		{"127.0.0.0/33", nil, `"127.0.0.0/33"`},
		{"localhost", nil, `"localhost"`},
		{"fe80::1%eth0", nil, "zones"},
	}
	for _, tt := range tests {
		got, err := ParseAllowList(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseAllowList(%q) err = %v, want one naming %s", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAllowList(%q): %v", tt.in, err)
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, " ") != strings.Join(tt.want, " ") {
			t.Errorf("ParseAllowList(%q) = %v, want %v", tt.in, s, tt.want)
		}
	}
}
