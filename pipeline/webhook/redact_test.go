package webhook_test

import (
	"strings"
	"testing"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://hooks.example/in", "https://hooks.example/in"},
		{"http://127.0.0.1:17199/internal?token=abc", "http://127.0.0.1:17199/internal?REDACTED"},
		{"https://user:pass@hooks.example:8443/in", "https://REDACTED@hooks.example:8443/in"},
		{"https://user@hooks.example/in", "https://REDACTED@hooks.example/in"},
		{"https://a:b@c@hooks.example/in", "https://REDACTED@hooks.example/in"},
		{"https://hooks.example/in#frag", "https://hooks.example/in#REDACTED"},
		{"https://u:p@hooks.example/in?x=1#frag", "https://REDACTED@hooks.example/in?REDACTED#REDACTED"},
		{"https://hooks.example/in#frag?x", "https://hooks.example/in#REDACTED"},
		{"https://hooks.example/p@th", "https://hooks.example/p@th"}, // '@' in the path is not userinfo
		{"/relative?token=abc", "/relative?REDACTED"},
		{"//other.example/p?token=abc", "//other.example/p?REDACTED"},
		{"//u:p@other.example/p", "//REDACTED@other.example/p"},
		{"http://[::1/?token=abc", "http://[::1/?REDACTED"},
		{"http://x/?q=\"abc\" hunter2", "http://x/?REDACTED"},
		{"?", "?REDACTED"},
		{"", ""},
		{"HTTPS://U:P@H/", "HTTPS://REDACTED@H/"},
	}
	for _, tt := range tests {
		if got := webhook.RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := webhook.RedactURL(webhook.RedactURL(tt.in)); got != tt.want {
			t.Errorf("RedactURL is not idempotent on %q: %q", tt.in, got)
		}
	}
}

func TestRedactText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"no url here", "no url here"},
		{`Post "http://127.0.0.1:1/in?token=abc": dial tcp 127.0.0.1:1: connect: connection refused`,
			`Post "http://127.0.0.1:1/in?REDACTED": dial tcp 127.0.0.1:1: connect: connection refused`},
		{`Post "https://u:s3cr3t@h.example/in": EOF`, `Post "https://REDACTED@h.example/in": EOF`},
		{`Post "https://h.example/in?a=\"x\"&token=abc": EOF`, `Post "https://h.example/in?REDACTED": EOF`},
		{"two: http://a/?x=1 and (https://b/#f), done", "two: http://a/?REDACTED and (https://b/#REDACTED), done"},
		{"Location: ftp://u:p@x/y?z", "Location: ftp://REDACTED@x/y?REDACTED"},
		{"http://a/?x=1\nhttp://b/?y=2", "http://a/?REDACTED\nhttp://b/?REDACTED"},
		{"://?x", "://?REDACTED"},
	}
	for _, tt := range tests {
		if got := webhook.RedactText(tt.in); got != tt.want {
			t.Errorf("RedactText(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
	}
	// Secrets never survive, whatever surrounds them.
	for _, wrap := range []string{"%s", `"%s"`, "(%s)", "<%s>", "'%s'", "x=%s;", "[%s]"} {
		in := strings.Replace(wrap, "%s", "https://user:hunter2@h.example/p?token=abc#frag1", 1)
		assertNoSecret(t, "RedactText("+in+")", webhook.RedactText(in))
	}
}
