package api_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestConsoleAssets: the console is served under /console/ without a key,
// with its CSP, and every file index.html and the ES modules refer to is
// served from the binary (relative paths only: nothing from elsewhere).
func TestConsoleAssets(t *testing.T) {
	e := newEnv(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(e.srv.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("GET /console: %d Location %q, want 301 to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	get := func(path string) (string, http.Header) {
		t.Helper()
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b), resp.Header
	}
	index, hdr := get("/console/")
	if !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(hdr.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET /console/: Content-Type %q, CSP %q", hdr.Get("Content-Type"), hdr.Get("Content-Security-Policy"))
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(index, -1)
	imports := regexp.MustCompile(`import\s*[\w$*{}\s,]*?from\s*['"]([^'"]+)['"]`)
	seen := map[string]bool{}
	var walk func(path string)
	walk = func(path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		body, hdr := get("/console/" + path)
		if strings.HasSuffix(path, ".js") {
			if ct := hdr.Get("Content-Type"); !strings.Contains(ct, "javascript") {
				t.Errorf("%s: Content-Type %q, want JavaScript (module scripts need it)", path, ct)
			}
			dir := path[:strings.LastIndex(path, "/")+1]
			for _, m := range imports.FindAllStringSubmatch(body, -1) {
				if !strings.HasPrefix(m[1], "./") {
					t.Errorf("%s imports %q: only relative imports resolve without an import map or a CDN", path, m[1])
					continue
				}
				walk(dir + strings.TrimPrefix(m[1], "./"))
			}
		}
	}
	for _, r := range refs {
		if strings.Contains(r[1], "://") || strings.HasPrefix(r[1], "/") {
			t.Errorf("index.html refers to %q: assets must come from the binary", r[1])
			continue
		}
		walk(r[1])
	}
	for _, want := range []string{"app.js", "style.css", "vendor/preact.js", "vendor/preact-hooks.js", "vendor/htm.js", "vendor/uPlot.js"} {
		if !seen[want] {
			t.Errorf("%s not reached from index.html (seen %v)", want, seen)
		}
	}
}
