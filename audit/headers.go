package audit

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of the request and response detail an Attempt keeps (issue 12: the
// console's message page shows the request as sent and the response).
const (
	// MaxHeaders is how many bytes of header text (RequestHeaders,
	// ResponseHeaders) an Attempt keeps: 2 KiB, cut at a line end.
	MaxHeaders = 2 << 10
	// MaxBodyPreview is how many bytes of the request body an Attempt keeps
	// in BodyPreview: 512, cut at a UTF-8 boundary.
	MaxBodyPreview = 512
)

// Redacted replaces the value of a header that carries a credential.
const Redacted = "[redacted]"

// secretHeaders are never stored with their value: the Standard Webhooks
// signature, credentials and cookies in either direction.
var secretHeaders = []string{
	"webhook-signature", "authorization", "proxy-authorization", "cookie", "set-cookie",
	"x-api-key", "api-key", "x-auth-token", "www-authenticate", "proxy-authenticate",
}

// HeaderField is one header line: its canonical name and one value.
type HeaderField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// FormatHeaders renders h (an http.Header: canonical name → values) as the
// header text an Attempt keeps: one "Name: value" line per value, ordered by
// name (values in their order), each ending in '\n'. The values of
// credential headers (webhook-signature, Authorization, Cookie, Set-Cookie,
// API keys, …) are replaced by [Redacted]; a name or value containing a
// line break or more than 256 / 1024 bytes is cut. The text stops at the last
// whole line within [MaxHeaders] bytes. Safe for concurrent use.
func FormatHeaders(h map[string][]string) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		secret := slices.Contains(secretHeaders, strings.ToLower(k))
		for _, v := range h[k] {
			if secret {
				v = Redacted
			}
			line := oneLine(k, 256) + ": " + oneLine(v, 1024) + "\n"
			if b.Len()+len(line) > MaxHeaders {
				return b.String()
			}
			b.WriteString(line)
		}
	}
	return b.String()
}

// ParseHeaders splits header text written by [FormatHeaders] into its
// fields, in order; nil for "".
func ParseHeaders(s string) []HeaderField {
	var out []HeaderField
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			continue
		}
		name, value, _ := strings.Cut(line, ": ")
		out = append(out, HeaderField{Name: name, Value: value})
	}
	return out
}

// BodyPreview returns the first [MaxBodyPreview] bytes of body, cut back to
// a UTF-8 boundary, with invalid UTF-8 replaced (the column is text).
func BodyPreview(body []byte) string {
	return cutUTF8(string(body), MaxBodyPreview)
}

func oneLine(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return cutUTF8(s, n)
}

// cutUTF8 keeps at most n bytes of s, never splitting a rune, and makes the
// result valid UTF-8.
func cutUTF8(s string, n int) string {
	if len(s) > n {
		s = s[:n]
		for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
			if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
				break
			}
			s = s[:len(s)-1]
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
