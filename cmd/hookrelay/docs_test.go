package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hookrelay/hookrelay/retrytiers"
)

// The docs' most error-prone facts, kept honest (issue 8, item 13): the
// README's table of environment variables is exactly the settings table
// (names and single-value defaults), `hookrelay run --help` names every
// variable, and every HOOKRELAY_* name any doc mentions exists in the code.

var envName = regexp.MustCompile(`HOOKRELAY_[A-Z0-9_]*[A-Z0-9]`)

// repoRoot is the module root, two levels above cmd/hookrelay.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	return root
}

// readmeEnvTable returns the rows of the README's variable table (section
// "Pointing it at an existing Kafka and ClickHouse"): for each row, its
// variables (with "…_USER" expanded from the row's first name) and its
// default cell.
func readmeEnvTable(t *testing.T, readme string) (rows [][]string, defaults []string) {
	t.Helper()
	_, sec, ok := strings.Cut(readme, "### Pointing it at an existing Kafka and ClickHouse")
	if !ok {
		t.Fatal("README.md: section \"Pointing it at an existing Kafka and ClickHouse\" not found")
	}
	for _, line := range strings.Split(sec, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "HOOKRELAY_") {
			continue
		}
		var names []string
		for _, part := range strings.Split(cells[1], ",") {
			part = strings.Trim(strings.TrimSpace(part), "`")
			if rest, ok := strings.CutPrefix(part, "…_"); ok && len(names) > 0 {
				first := names[0]
				part = first[:strings.LastIndex(first, "_")+1] + rest
			}
			if envName.MatchString(part) {
				names = append(names, envName.FindString(part))
			}
		}
		rows = append(rows, names)
		defaults = append(defaults, strings.TrimSpace(cells[2]))
	}
	if len(rows) == 0 {
		t.Fatal("README.md: no HOOKRELAY_* row in the variable table")
	}
	return rows, defaults
}

// sameDefault compares a documented default with a setting's: durations and
// schedules by value, anything else as text.
func sameDefault(doc, code string) bool {
	if doc == code {
		return true
	}
	if a, err := time.ParseDuration(doc); err == nil {
		b, err := time.ParseDuration(code)
		return err == nil && a == b
	}
	if a, err := retrytiers.ParseSchedule(doc); err == nil && strings.Contains(doc, ",") {
		b, err := retrytiers.ParseSchedule(code)
		return err == nil && a.String() == b.String()
	}
	return false
}

func TestReadmeEnvTableMatchesSettings(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, defaults := readmeEnvTable(t, string(raw))
	bySetting := map[string]setting{}
	for _, s := range settings {
		bySetting[s.env] = s
	}
	inDoc := map[string]bool{}
	for i, names := range rows {
		for _, n := range names {
			inDoc[n] = true
			if _, ok := bySetting[n]; !ok {
				t.Errorf("README.md's variable table names %s, which is no setting of cmd/hookrelay/config.go", n)
			}
		}
		// A default given as one code span (or a bare number) must be the
		// setting's; prose defaults ("host name", "none") are not checked.
		d := defaults[i]
		if len(names) != 1 || strings.Contains(strings.Trim(d, "`"), " ") || strings.Count(d, "`") > 2 {
			continue
		}
		if s, ok := bySetting[names[0]]; ok && (strings.HasPrefix(d, "`") || strings.Trim(d, "0123456789") == "") {
			if d = strings.Trim(d, "`"); !sameDefault(d, s.def) {
				t.Errorf("README.md: %s defaults to %q, but config.go's default is %q", names[0], d, s.def)
			}
		}
	}
	for _, s := range settings {
		if !inDoc[s.env] {
			t.Errorf("setting --%s (%s) is missing from README.md's variable table", s.flag, s.env)
		}
	}
}

// TestRunHelpNamesEveryVariable: the README sends readers to
// `hookrelay run --help` for the variables.
func TestRunHelpNamesEveryVariable(t *testing.T) {
	fs := runCmd().Flags()
	for _, s := range settings {
		f := fs.Lookup(s.flag)
		if f == nil {
			t.Errorf("hookrelay run has no --%s", s.flag)
			continue
		}
		if !strings.Contains(f.Usage, "["+s.env+"]") {
			t.Errorf("hookrelay run --help: --%s does not name %s: %q", s.flag, s.env, f.Usage)
		}
	}
	var extra []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !strings.Contains(f.Usage, "[HOOKRELAY_") {
			extra = append(extra, f.Name)
		}
	})
	if len(extra) > 0 {
		t.Errorf("hookrelay run flags without an environment variable: %v", extra)
	}
}

// TestDocsNameOnlyExistingVariables: every HOOKRELAY_* name in the docs
// occurs in some non-Markdown file of the repository (Go, shell, Makefile,
// deploy files), so a renamed or invented variable fails here.
func TestDocsNameOnlyExistingVariables(t *testing.T) {
	root := repoRoot(t)
	inCode := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".local", "node_modules", "bin", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(path, ".md") || path == filepath.Join(root, "cmd", "hookrelay", "docs_test.go") {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > 1<<20 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range envName.FindAllString(string(b), -1) {
			inCode[n] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"README.md", "docs/ARCHITECTURE.md", "docs/OPERATIONS.md", "e2e/README.md", "BENCHMARKS.md"} {
		raw, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, n := range envName.FindAllString(string(raw), -1) {
			if !inCode[n] && !seen[n] {
				seen[n] = true
				t.Errorf("%s names %s, which no source file of the repository uses", doc, n)
			}
		}
	}
}

// readmeTable returns the first cells of the rows of the first table after
// heading in README.md whose header starts with first.
func readmeTable(t *testing.T, heading, first string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(raw), heading+"\n")
	if !ok {
		t.Fatalf("README.md: section %q not found", heading)
	}
	var rows [][]string
	in := false
	for _, line := range strings.Split(sec, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			if in {
				break
			}
			continue
		}
		c := make([]string, 0, len(cells)-2)
		for _, cell := range cells[1 : len(cells)-1] {
			c = append(c, strings.TrimSpace(cell))
		}
		switch {
		case !in && c[0] == first:
			in = true
		case in && !strings.HasPrefix(c[0], "---"):
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("README.md: no %q table under %q", first, heading)
	}
	return rows
}

// TestReadmeCommandTableMatchesCommands: README.md's command table names
// every command of the tree (each leaf: `endpoints add`, `recover`, …) and
// nothing else.
func TestReadmeCommandTableMatchesCommands(t *testing.T) {
	inDoc := map[string]bool{}
	for _, row := range readmeTable(t, "### Commands", "command") {
		for _, c := range strings.Split(row[0], ",") {
			inDoc[strings.Trim(strings.TrimSpace(c), "`")] = true
		}
	}
	inCode := map[string]bool{}
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		if c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if len(c.Commands()) == 0 {
			inCode[strings.TrimSpace(path)] = true
		}
		for _, sub := range c.Commands() {
			walk(sub, path+" "+sub.Name())
		}
	}
	walk(rootCmd(), "")
	for c := range inCode {
		if !inDoc[c] {
			t.Errorf("command %q is missing from README.md's command table", c)
		}
	}
	for c := range inDoc {
		if !inCode[c] {
			t.Errorf("README.md's command table names %q, which is no command", c)
		}
	}
}

// TestReadmeAPIClientTableMatchesSettings: the table of the variables the
// API-client commands read is apiClientSettings (names and defaults).
func TestReadmeAPIClientTableMatchesSettings(t *testing.T) {
	rows := readmeTable(t, "### Commands", "variable")
	if len(rows) != len(apiClientSettings) {
		t.Errorf("README.md lists %d API-client variables, apiClientSettings has %d", len(rows), len(apiClientSettings))
	}
	for i, s := range apiClientSettings {
		if i >= len(rows) {
			break
		}
		want := "`" + s.def + "`"
		if s.def == "" {
			want = "none"
		}
		if rows[i][0] != "`"+s.env+"`" || rows[i][1] != want {
			t.Errorf("README.md row %d: %s = %s, want `%s` = %s", i+1, rows[i][0], rows[i][1], s.env, want)
		}
	}
}
