package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	const e2e = "github.com/hookrelay/hookrelay/e2e"
	pass := func(pkg, test string) string {
		return `{"Action":"run","Package":"` + pkg + `","Test":"` + test + `"}
{"Action":"output","Package":"` + pkg + `","Test":"` + test + `","Output":"=== RUN   ` + test + `\n"}
{"Action":"pass","Package":"` + pkg + `","Test":"` + test + `"}
`
	}
	pkgOK := func(pkg string) string {
		return `{"Action":"output","Package":"` + pkg + `","Output":"ok  \t` + pkg + `\t0.1s\n"}
{"Action":"pass","Package":"` + pkg + `"}
`
	}
	tests := []struct {
		name     string
		in       string
		wantCode int
		wantOut  []string
	}{{
		name:     "e2e ran",
		in:       pass(e2e, "TestA") + pkgOK(e2e) + pass("x/unit", "TestB") + pkgOK("x/unit"),
		wantCode: 0,
		wantOut:  []string{"ok  \t" + e2e, "\n2 passed, 0 failed, 0 skipped\n"},
	}, {
		name:     "no e2e test ran",
		in:       pass("x/unit", "TestB") + pkgOK("x/unit") + `{"Action":"output","Package":"` + e2e + `","Output":"ok  \t` + e2e + `\t0.1s [no tests to run]\n"}` + "\n",
		wantCode: 1,
		wantOut:  []string{"no test ran in " + e2e, "1 passed, 0 failed, 0 skipped"},
	}, {
		name: "e2e skipped",
		in: pass(e2e, "TestA") + `{"Action":"skip","Package":"` + e2e + `","Test":"TestS"}
` + pkgOK(e2e),
		wantCode: 1,
		wantOut:  []string{"1 test(s) skipped in " + e2e, "1 passed, 0 failed, 1 skipped"},
	}, {
		name: "failure shows the test's output",
		in: pass(e2e, "TestA") + `{"Action":"output","Package":"` + e2e + `","Test":"TestF","Output":"    f_test.go:9: boom\n"}
{"Action":"fail","Package":"` + e2e + `","Test":"TestF"}
{"Action":"output","Package":"` + e2e + `","Output":"FAIL\t` + e2e + `\t0.2s\n"}
{"Action":"fail","Package":"` + e2e + `"}
`,
		wantCode: 1,
		wantOut:  []string{"f_test.go:9: boom", "FAIL\t" + e2e, "package " + e2e, "1 passed, 1 failed, 0 skipped"},
	}, {
		name: "build failure",
		in: `{"ImportPath":"x/broken","Action":"build-output","Output":"x/broken/a.go:1: syntax error\n"}
{"ImportPath":"x/broken","Action":"build-fail"}
` + pass(e2e, "TestA"),
		wantCode: 1,
		wantOut:  []string{"syntax error", "x/broken [build failed]"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			code := run(strings.NewReader(tt.in), &out, []string{e2e})
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tt.wantCode, out.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
