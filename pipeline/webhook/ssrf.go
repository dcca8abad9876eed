package webhook

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// BlockedError is the SSRF guard's refusal to connect to Addr, the address a
// host name resolved to (or the literal address of the URL, in any spelling:
// see [ParseHost]). The sender returns it in [Result.Err]: as is when the URL
// host is an IP literal (refused before any lookup or dial, [CheckHost]),
// wrapped in *url.Error and *net.OpError when a resolved address is refused
// at dial time; find it with errors.As. [Classify] maps it to
// [audit.Blocked]: permanent. Its message names the address and the rule,
// never the URL.
type BlockedError struct {
	Addr   netip.Addr // the refused address, as dialled (an IPv4-mapped form stays mapped)
	Reason string     // which rule refused it, e.g. "loopback", "private", "documentation"
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("ssrf guard: refused to connect to %s (%s address, not in the allow-list)", e.Addr, e.Reason)
}

// blockedRange is one non-global range the guard refuses unless allowed.
type blockedRange struct {
	prefix netip.Prefix
	reason string
}

// blockedRanges are the special-purpose ranges refused besides what
// netip.Addr's predicates catch (loopback, link-local, multicast, unspecified,
// limited broadcast, RFC 1918 and fc00::/7). Sources: the IANA IPv4 and IPv6
// Special-Purpose Address Registries (RFC 6890 and updates).
var blockedRanges = func() []blockedRange {
	list := []struct{ cidr, reason string }{
		{"0.0.0.0/8", "this-network"},          // RFC 791
		{"100.64.0.0/10", "cgnat"},             // RFC 6598
		{"192.0.0.0/24", "ietf-protocol"},      // RFC 6890
		{"192.0.2.0/24", "documentation"},      // TEST-NET-1, RFC 5737
		{"192.88.99.0/24", "6to4-relay"},       // RFC 7526 (deprecated anycast)
		{"198.18.0.0/15", "benchmarking"},      // RFC 2544
		{"198.51.100.0/24", "documentation"},   // TEST-NET-2, RFC 5737
		{"203.0.113.0/24", "documentation"},    // TEST-NET-3, RFC 5737
		{"240.0.0.0/4", "reserved"},            // RFC 1112, incl. 255.255.255.255
		{"::/96", "ipv4-compatible"},           // deprecated, RFC 4291; incl. :: and ::1
		{"::ffff:0:0:0/96", "ipv4-translated"}, // SIIT, RFC 2765
		{"64:ff9b:1::/48", "nat64-local"},      // RFC 8215
		{"100::/64", "discard"},                // RFC 6666
		{"2001::/23", "ietf-protocol"},         // RFC 2928, incl. Teredo 2001::/32
		{"2001:db8::/32", "documentation"},     // RFC 3849
		{"2002::/16", "6to4"},                  // RFC 3056: reaches embedded IPv4 via relays
		{"3fff::/20", "documentation"},         // RFC 9637
		{"5f00::/16", "srv6"},                  // RFC 9602
		{"fec0::/10", "site-local"},            // deprecated, RFC 3879
	}
	out := make([]blockedRange, len(list))
	for i, r := range list {
		out[i] = blockedRange{netip.MustParsePrefix(r.cidr), r.reason}
	}
	return out
}()

// nat64WellKnown is 64:ff9b::/96 (RFC 6052): the last 32 bits are an IPv4
// address reached through a NAT64 gateway, so the guard judges that address.
var nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")

// guard decides whether an address may be dialled.
type guard struct {
	allow []netip.Prefix // masked
}

// check returns nil when a may be dialled, else a *BlockedError. The rules,
// in order:
//  1. The zone is dropped and an IPv4-mapped IPv6 address (::ffff:a.b.c.d)
//     is judged as the IPv4 address it maps (netip.Addr.Unmap).
//  2. An address inside an allow-list prefix is allowed.
//  3. An address in 64:ff9b::/96 (NAT64 well-known prefix) is judged as its
//     embedded IPv4 address (the allow-list applies to that address too).
//  4. Loopback, private (RFC 1918, fc00::/7), link-local, multicast,
//     unspecified, broadcast and every range in blockedRanges is refused.
//  5. Anything else, a global unicast address, is allowed.
func (g *guard) check(dialled netip.Addr) error {
	a := dialled.WithZone("").Unmap()
	if g.allowed(a) {
		return nil
	}
	if nat64WellKnown.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:16]))
		if g.allowed(a) {
			return nil
		}
	}
	if reason := nonGlobalReason(a); reason != "" {
		return &BlockedError{Addr: dialled, Reason: reason}
	}
	return nil
}

func (g *guard) allowed(a netip.Addr) bool {
	for _, p := range g.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// nonGlobalReason names why a (unzoned, unmapped) is not a global unicast
// destination, or returns "" when it is one.
func nonGlobalReason(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case !a.IsGlobalUnicast():
		return "broadcast" // the only remaining non-global-unicast form
	}
	for _, r := range blockedRanges {
		if r.prefix.Contains(a) {
			return r.reason
		}
	}
	return ""
}

// IsBlocked reports whether the SSRF guard refuses addr when the allow-list
// is allow, and why (the reason is "" when it is not refused). It applies the
// same rules as the sender's dial-time check.
func IsBlocked(addr netip.Addr, allow []netip.Prefix) (blocked bool, reason string) {
	g := guard{allow: maskAll(allow)}
	if err := g.check(addr); err != nil {
		return true, err.(*BlockedError).Reason
	}
	return false, ""
}

// ParseAllowList parses an operator allow-list such as the value of
// HOOKRELAY_ALLOW_NETWORKS: CIDR prefixes separated by commas and/or
// whitespace, e.g. "127.0.0.0/8, ::1/128". A bare address is a single-address
// prefix (/32 or /128). An empty string is an empty list. Prefixes are masked
// (10.1.2.3/8 becomes 10.0.0.0/8). The error names the offending entry.
func ParseAllowList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		var p netip.Prefix
		if strings.Contains(f, "/") {
			var err error
			if p, err = netip.ParsePrefix(f); err != nil {
				return nil, fmt.Errorf("allow-list entry %q: not a CIDR prefix: %w", f, err)
			}
		} else {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("allow-list entry %q: not an address or CIDR prefix: %w", f, err)
			}
			if a.Zone() != "" {
				return nil, fmt.Errorf("allow-list entry %q: zones are not allowed", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// maskAll returns a masked copy of ps with IPv4-mapped prefixes unmapped, so
// that "::ffff:127.0.0.0/104" and "127.0.0.0/8" mean the same.
func maskAll(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	for i, p := range out {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out[i] = p.Masked()
	}
	return out
}
