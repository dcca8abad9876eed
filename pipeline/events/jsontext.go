package events

// JSON text helpers: a scanner over the top-level members of an object
// (strict over validated input, tolerant for the identity scan of broken
// input), a string decoder that reports unpaired surrogate escapes instead
// of replacing them, and the canonical compact form of a JSON value that
// makes the webhook body independent of how the event was serialised.

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// errUnpairedSurrogate is returned by decodeString for a \uD800-\uDFFF
// escape that is not part of a surrogate pair (RFC 8259 §8.2).
var errUnpairedSurrogate = errors.New("unpaired surrogate escape")

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// stringEnd returns the index after the closing quote of the string that
// starts at b[i] (a '"'), or -1 when b ends first.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// valueEnd returns the index after the JSON value that starts at b[i], or
// -1 when b ends first or the value is malformed in a way that matters for
// finding its end. It does not validate (json.Valid does that).
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) && !isWS(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// member is one top-level member of a JSON object: its decoded name and
// its raw value.
type member struct {
	name string
	raw  []byte
}

// eachMember calls fn for the top-level members of the object in b, in
// order, until fn returns false. It stops quietly at the first thing that
// is not a well-formed member (so it reads broken JSON up to the break) or
// at a member name with an unpaired surrogate; it returns whether it
// reached the object's closing brace.
func eachMember(b []byte, fn func(m member) bool) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		end := stringEnd(b, i)
		if end < 0 {
			return false
		}
		name, err := decodeString(b[i:end])
		if err != nil {
			return false
		}
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		vend := valueEnd(b, i)
		if vend < 0 {
			return false
		}
		if !fn(member{name: name, raw: b[i:vend]}) {
			return false
		}
		i = skipWS(b, vend)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
}

// hex4 parses the 4 hex digits at b[i:i+4]; ok is false if there are not 4.
func hex4(b []byte, i int) (r rune, ok bool) {
	if i+4 > len(b) {
		return 0, false
	}
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// escapeAt decodes the escape sequence at raw[i] (a '\\'). It returns the
// rune, the index after the sequence, and lone = true for an unpaired
// surrogate (r is then the surrogate itself). ok is false for a malformed
// escape.
func escapeAt(raw []byte, i int) (r rune, next int, lone, ok bool) {
	if i+1 >= len(raw) {
		return 0, 0, false, false
	}
	switch raw[i+1] {
	case '"', '\\', '/':
		return rune(raw[i+1]), i + 2, false, true
	case 'b':
		return '\b', i + 2, false, true
	case 'f':
		return '\f', i + 2, false, true
	case 'n':
		return '\n', i + 2, false, true
	case 'r':
		return '\r', i + 2, false, true
	case 't':
		return '\t', i + 2, false, true
	case 'u':
		r, ok := hex4(raw, i+2)
		if !ok {
			return 0, 0, false, false
		}
		next := i + 6
		if utf16.IsSurrogate(r) {
			if r < 0xDC00 && next+1 < len(raw) && raw[next] == '\\' && raw[next+1] == 'u' {
				if r2, ok := hex4(raw, next+2); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
					return utf16.DecodeRune(r, r2), next + 6, false, true
				}
			}
			return r, next, true, true
		}
		return r, next, false, true
	}
	return 0, 0, false, false
}

// decodeString decodes the JSON string token raw (with its quotes). Bytes
// that are not valid UTF-8 are kept as they are (callers check UTF-8 of
// the whole text first); an unpaired surrogate escape is an error wrapping
// errUnpairedSurrogate, not a U+FFFD.
func decodeString(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", errors.New("not a JSON string")
	}
	raw = raw[1 : len(raw)-1]
	if !strings.ContainsRune(string(raw), '\\') {
		return string(raw), nil
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			out = append(out, raw[i])
			i++
			continue
		}
		r, next, lone, ok := escapeAt(raw, i)
		if !ok {
			return "", fmt.Errorf("malformed escape at byte %d", i+1)
		}
		if lone {
			return "", fmt.Errorf("%w \\u%04x at byte %d", errUnpairedSurrogate, r, i+1)
		}
		out = utf8.AppendRune(out, r)
		i = next
	}
	return string(out), nil
}

// appendEscaped appends r in the canonical form inside a JSON string.
func appendEscaped(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 || utf16.IsSurrogate(r) {
		return fmt.Appendf(dst, `\u%04x`, r)
	}
	return utf8.AppendRune(dst, r)
}

// appendCanonicalString appends s (valid UTF-8) as a canonical JSON string:
// only '"', '\\' and U+0000-U+001F are escaped (the two-character forms
// where JSON has one, else \u00xx); everything else, '/' and non-ASCII
// included, is written as itself in UTF-8.
func appendCanonicalString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		dst = appendEscaped(dst, r)
	}
	return append(dst, '"')
}

// appendCanonicalRawString re-encodes the JSON string token raw (valid
// JSON, valid UTF-8) canonically. An unpaired surrogate escape cannot be
// written as UTF-8 and stays an escape, lower-case (\udead).
func appendCanonicalRawString(dst, raw []byte) []byte {
	dst = append(dst, '"')
	raw = raw[1 : len(raw)-1]
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		r, next, _, ok := escapeAt(raw, i)
		if !ok { // not reached for valid JSON
			dst = append(dst, c)
			i++
			continue
		}
		dst = appendEscaped(dst, r)
		i = next
	}
	return append(dst, '"')
}

// canonicalJSON returns the canonical compact form of the valid JSON text
// b: no insignificant whitespace, every string in the canonical form of
// appendCanonicalString; member order, numbers and literals exactly as in
// b. Two serialisations of the same JSON value that differ only in
// whitespace and string escapes have the same canonical form.
func canonicalJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case isWS(c):
			i++
		case c == '"':
			end := stringEnd(b, i)
			if end < 0 { // not reached for valid JSON
				return append(out, b[i:]...)
			}
			out = appendCanonicalRawString(out, b[i:end])
			i = end
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

// checkString checks s against the CloudEvents String type (core spec
// §Type System): valid Unicode, none of the control characters
// U+0000-U+001F and U+007F-U+009F, no noncharacters (U+FDD0-U+FDEF and the
// last two code points of every plane). Surrogates cannot occur: s is
// UTF-8 and decodeString refuses unpaired surrogate escapes.
func checkString(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Errorf("not valid UTF-8 at byte %d", i)
		case r < 0x20 || (r >= 0x7F && r <= 0x9F):
			return fmt.Errorf("control character U+%04X at byte %d is not allowed in a String (core spec §Type System)", r, i)
		case (r >= 0xFDD0 && r <= 0xFDEF) || r&0xFFFE == 0xFFFE:
			return fmt.Errorf("noncharacter U+%04X at byte %d is not allowed in a String (core spec §Type System)", r, i)
		}
	}
	return nil
}
