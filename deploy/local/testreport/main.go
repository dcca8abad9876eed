// Command testreport reads `go test -json` from stdin, prints what a plain
// `go test` would (each package's closing line, and the whole output of every
// failed test), then a summary, and fails when the suite proves less than it
// should: any failure, or a required package tree that ran no test or
// skipped one (issue 2: a build-tag or skip slip must not pass silently).
//
// Usage:
//
//	go test -json ./... | go run ./deploy/local/testreport -require github.com/hookrelay/hookrelay/e2e
//
// The exit code is 0 only when every test passed, no package failed, and
// every -require tree ran at least one test and skipped none.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Output     string
}

type counts struct{ passed, failed, skipped int }

type requirement []string

func (r *requirement) String() string     { return strings.Join(*r, ",") }
func (r *requirement) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	var req requirement
	flag.Var(&req, "require", "import path `prefix` whose packages together must run at least one test and skip none (repeatable)")
	flag.Parse()
	os.Exit(run(os.Stdin, os.Stdout, req))
}

func run(in io.Reader, out io.Writer, req []string) int {
	perPkg := map[string]*counts{}
	pending := map[string][]string{} // package + "\x00" + test -> output lines
	var failedPkgs []string
	var total counts

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, string(line)) // not test2json: pass through
			continue
		}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
			continue
		case "build-fail":
			failedPkgs = append(failedPkgs, e.ImportPath+" [build failed]")
			continue
		}
		if e.Test == "" {
			// Package-level output: "ok  pkg 1.2s", "FAIL", panics outside tests.
			if e.Action == "output" && e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
			if e.Action == "fail" {
				failedPkgs = append(failedPkgs, e.Package)
			}
			continue
		}
		key := e.Package + "\x00" + e.Test
		c := perPkg[e.Package]
		if c == nil {
			c = &counts{}
			perPkg[e.Package] = c
		}
		switch e.Action {
		case "output":
			pending[key] = append(pending[key], e.Output)
		case "pass":
			c.passed++
			total.passed++
			delete(pending, key)
		case "skip":
			c.skipped++
			total.skipped++
			delete(pending, key)
		case "fail":
			c.failed++
			total.failed++
			fmt.Fprintf(out, "=== output of failed %s %s\n", e.Package, e.Test)
			fmt.Fprint(out, strings.Join(pending[key], ""))
			delete(pending, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "testreport: reading go test -json: %v\n", err)
		return 1
	}

	code := 0
	fmt.Fprintln(out, "---- tests per package (passed/failed/skipped, subtests included) ----")
	pkgs := make([]string, 0, len(perPkg))
	for p := range perPkg {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		c := perPkg[p]
		fmt.Fprintf(out, "%-60s %4d %4d %4d\n", p, c.passed, c.failed, c.skipped)
	}
	for _, prefix := range req {
		var c counts
		for p, pc := range perPkg {
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				c.passed += pc.passed
				c.failed += pc.failed
				c.skipped += pc.skipped
			}
		}
		if c.passed+c.failed == 0 {
			fmt.Fprintf(out, "testreport: FAIL: no test ran in %s/... (build tag, skip or missing tests?)\n", prefix)
			code = 1
		}
		if c.skipped > 0 {
			fmt.Fprintf(out, "testreport: FAIL: %d test(s) skipped in %s/...; e2e tests must not skip\n", c.skipped, prefix)
			code = 1
		}
	}
	for _, p := range failedPkgs {
		fmt.Fprintf(out, "testreport: FAIL: package %s\n", p)
		code = 1
	}
	if total.failed > 0 {
		code = 1
	}
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped\n", total.passed, total.failed, total.skipped)
	return code
}
