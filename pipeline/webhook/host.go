package webhook

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// HostError says why a URL host can never be dialled: it is not a valid
// host name, or it is an IP literal in a spelling other than the canonical
// one (e.g. "2130706433", "0x7f.1", "127.1", "0177.0.0.1", "127.0.0.1.").
// Resolvers disagree on such spellings: glibc's getaddrinfo (inet_aton)
// reads them as addresses, Go's resolver (GODEBUG=netdns=go, and every
// CGO_ENABLED=0 build) looks them up as names and fails, so they can never
// be delivered to reliably.
//
// [Sender.Send] returns it wrapped in ErrInvalidRequest before any network
// activity; [Classify] maps it to [audit.Failed] with class
// [ClassInvalidHost]: permanent, never retried. Endpoint validation
// (pipeline/endpoints) refuses such URLs with the same message.
type HostError struct {
	Host   string     // the host as written in the URL (bounded to 256 bytes)
	Addr   netip.Addr // the address a numeric spelling denotes; invalid when the host is not numeric
	Reason string     // e.g. `IPv4 address in a non-canonical spelling; write it as "127.0.0.1"`
}

func (e *HostError) Error() string {
	return fmt.Sprintf("host %q cannot be dialled: %s", e.Host, e.Reason)
}

// Host is a URL host as a resolver would read it; see [ParseHost].
type Host struct {
	// Addr is the IP address the host denotes when it is an IP literal in
	// any spelling (IPv4-mapped and zoned forms stay as written; the SSRF
	// guard unmaps them). Invalid when the host is a name.
	Addr netip.Addr
	// Canonical reports whether an IP literal is written in the form Go's
	// resolver dials as an address: dotted-decimal IPv4 without leading
	// zeros, or an IPv6 literal (in brackets in a URL). A name is canonical.
	Canonical bool
}

// IsIP reports whether the host is an IP literal (in any spelling).
func (h Host) IsIP() bool { return h.Addr.IsValid() }

// maxHostInError bounds the host repeated in a HostError.
const maxHostInError = 256

// ParseHost reads a URL host (url.URL.Hostname(): no port, no brackets) the
// way resolvers do, so that every spelling of an IP literal is found. It is
// the one parser of numeric hosts: endpoint validation and the sender use
// it. The rules, after mapping a non-ASCII host with IDNA (UTS #46, the
// mapping net/http applies: "１２７。０。０。１" is "127.0.0.1"):
//
//   - A host with a ':' is an IPv6 literal, optionally zoned
//     ("fe80::1%eth0"); it must parse (netip.ParseAddr). Canonical.
//   - Otherwise, if its last label (after one trailing '.') is a number —
//     decimal digits, or "0x"/"0X" and hex digits — the host is an IPv4
//     address in the inet_aton forms (WHATWG URL "ends in a number"): 1 to 4
//     parts, each decimal, octal (leading 0) or hex (0x), the last part
//     filling the remaining bytes ("127.1" is 127.0.0.1, "2130706433" too).
//     A host that ends in a number but is no such address ("1.2.3.4.5",
//     "256.0.0.1", "08.0.0.1") is an error: no resolver can dial it.
//     Canonical only in dotted-decimal form with four parts, no leading
//     zeros and no trailing dot.
//   - Anything else is a host name, which must be one Go's resolver would
//     look up (net's isDomainName: letters, digits, '-' and '_', labels of 1
//     to 63 bytes, not starting with '-', at most 253 bytes): canonical, no
//     address; its DNS answers are checked at dial time. Any other name
//     ("a..b", "-x.example", "a!b", a 64-byte label) is an error.
//
// The error is a *HostError.
func ParseHost(host string) (Host, error) {
	bad := func(addr netip.Addr, format string, args ...any) (Host, error) {
		h := host
		if len(h) > maxHostInError {
			h = h[:maxHostInError] + "…"
		}
		return Host{Addr: addr}, &HostError{Host: h, Addr: addr, Reason: fmt.Sprintf(format, args...)}
	}
	if host == "" {
		return bad(netip.Addr{}, "empty host")
	}
	h := host
	if !isASCII(h) {
		mapped, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return bad(netip.Addr{}, "not a valid international host name")
		}
		h = mapped
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return bad(netip.Addr{}, "not a valid IPv6 address")
		}
		return Host{Addr: a, Canonical: h == host}, nil
	}
	name := strings.TrimSuffix(h, ".")
	labels := strings.Split(name, ".")
	if !isNumericLabel(labels[len(labels)-1]) {
		if why := badDomainName(h); why != "" {
			return bad(netip.Addr{}, "not a valid DNS name: %s", why)
		}
		return Host{Canonical: true}, nil
	}
	a, ok := parseInetAton(labels)
	if !ok {
		return bad(netip.Addr{}, "ends in a number but is not an IPv4 address")
	}
	if h != host || name != h || a.String() != h {
		return bad(a, "IPv4 address in a non-canonical spelling, which Go's resolver does not read as an address; write it as %q", a.String())
	}
	return Host{Addr: a, Canonical: true}, nil
}

// badDomainName says why name (ASCII, possibly with one trailing dot) is not
// a name Go's resolver looks up, or returns "". The rules are those of
// net.isDomainName (RFC 1035, RFC 3696).
func badDomainName(name string) string {
	n := len(name)
	if n > 254 || n == 254 && name[n-1] != '.' {
		return "longer than 253 bytes"
	}
	name = strings.TrimSuffix(name, ".")
	for _, l := range strings.Split(name, ".") {
		switch {
		case l == "":
			return "empty label"
		case len(l) > 63:
			return "a label longer than 63 bytes"
		case l[0] == '-' || l[len(l)-1] == '-':
			return "a label starts or ends with '-'"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("character %q not allowed", c)
			}
		}
	}
	return ""
}

// isNumericLabel is WHATWG's "ends in a number" test on the last label: all
// decimal digits, or 0x/0X followed by hex digits (possibly none).
func isNumericLabel(l string) bool {
	if l == "" {
		return false
	}
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			if !isHexDigit(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

// parseInetAton parses 1 to 4 numeric parts as inet_aton does.
func parseInetAton(parts []string) (netip.Addr, bool) {
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Number parses one part: decimal, octal with a leading 0, or hex
// with 0x ("0x" alone is 0, as in WHATWG and inet_aton).
func parseIPv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true
		}
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	n, err := strconv.ParseUint(p, base, 64)
	return n, err == nil // a syntax error (e.g. "08") or more than 64 bits
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// CheckHost is the SSRF guard applied to a URL host before any DNS lookup,
// with the same rules as the dial-time check: it returns a *HostError when
// the host can never be dialled (see [ParseHost]), a *BlockedError when it
// is an IP literal, in any spelling, inside a range the guard refuses and
// allow does not allow, and nil otherwise (a name, or an address the guard
// lets through). A refused address takes precedence, so
// "http://2130706433/" is blocked as loopback. Host names are not resolved:
// their addresses are checked when dialled.
func CheckHost(host string, allow []netip.Prefix) error {
	g := guard{allow: maskAll(allow)}
	return g.checkHost(host)
}

// checkHost is CheckHost with g's allow-list.
func (g *guard) checkHost(host string) error {
	h, err := ParseHost(host)
	if h.IsIP() {
		if berr := g.check(h.Addr); berr != nil {
			return berr
		}
	}
	return err
}
