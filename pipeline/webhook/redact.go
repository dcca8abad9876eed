package webhook

import (
	"strings"
	"unicode/utf8"
)

// Redacted replaces the parts of a URL that [RedactURL] removes.
const Redacted = "REDACTED"

// RedactURL returns raw with the parts that commonly carry credentials
// replaced by [Redacted]: the userinfo ("https://REDACTED@host/"), the query
// ("?REDACTED") and the fragment ("#REDACTED"). The scheme, host, port and
// path stay, so the result still tells which endpoint or target it was.
// Every URL hookrelay writes to a log line, an attempt row, a record or a
// metric label goes through it (issue 8, item 7: a receiver's
// Location: …?token=abc must not reach the delivery log).
//
// It works on text, not on a parsed URL, so it also redacts relative and
// scheme-relative references ("/in?token=x", "//host?x") and strings that do
// not parse: everything after the first '?' or '#' goes, and anything up to
// the last '@' of the authority. A string without '?', '#' or '@' is
// returned unchanged.
func RedactURL(raw string) string {
	base, suffix := raw, ""
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		base = raw[:i]
		if raw[i] == '?' {
			suffix = "?" + Redacted
			if strings.IndexByte(raw[i:], '#') >= 0 {
				suffix += "#" + Redacted
			}
		} else {
			suffix = "#" + Redacted
		}
	}
	return redactUserinfo(base) + suffix
}

// redactUserinfo replaces the userinfo of a URL without query or fragment.
func redactUserinfo(s string) string {
	start := 0
	if i := schemeEnd(s); i > 0 {
		start = i + 1 // past "scheme:"
	}
	for start < len(s) && (s[start] == '/' || s[start] == '\\') {
		start++
	}
	end := len(s)
	if i := strings.IndexByte(s[start:], '/'); i >= 0 {
		end = start + i
	}
	at := strings.LastIndexByte(s[start:end], '@')
	if at < 0 {
		return s
	}
	return s[:start] + Redacted + s[start+at:]
}

// schemeEnd returns the index of the ':' ending a leading URL scheme
// (RFC 3986 §3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )), or -1.
func schemeEnd(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i
		default:
			return -1
		}
	}
	return -1
}

// RedactText returns s with every absolute URL in it ("scheme://…")
// passed through [RedactURL], for free text that may embed URLs: error
// messages (a *url.Error from net/http reads `Post "https://…?token=…":
// dial tcp …`), redirect explanations, log fields. A URL runs to the next
// whitespace; characters that commonly close a quoted URL (`"'`), `)]}>,;:`)
// at its end are kept after the redaction. Text without "://" is returned
// unchanged.
func RedactText(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		start := i
		for start > 0 && isSchemeByte(rest[start-1]) {
			start--
		}
		end := i + 3
		for end < len(rest) {
			r, size := utf8.DecodeRuneInString(rest[end:])
			if isSpace(r) {
				break
			}
			end += size
		}
		tok := rest[start:end]
		trail := len(tok)
		for trail > 0 && strings.IndexByte("\"'`)]}>,;:", tok[trail-1]) >= 0 {
			trail--
		}
		b.WriteString(rest[:start])
		b.WriteString(RedactURL(tok[:trail]))
		b.WriteString(tok[trail:])
		rest = rest[end:]
	}
}

func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xA0:
		return true
	}
	return r > 0xff && (r == 0x1680 || r >= 0x2000 && r <= 0x200a || r == 0x2028 || r == 0x2029 || r == 0x202f || r == 0x205f || r == 0x3000)
}

// boundText cuts s to at most n bytes on a rune boundary.
func boundText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
