package check

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repo is the repository root (deploy/check is two levels down).
func repo(t *testing.T, parts ...string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join(append([]string{"..", ".."}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func readFile(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(repo(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// imagePinned reports whether ref names a pinned image: a digest, or a tag
// other than "latest".
func imagePinned(ref string) bool {
	if _, digest, ok := strings.Cut(ref, "@"); ok {
		return strings.HasPrefix(digest, "sha256:") && len(digest) == len("sha256:")+64
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	return ok && tag != "" && tag != "latest"
}

func TestImagePinned(t *testing.T) {
	for ref, want := range map[string]bool{
		"apache/kafka:4.1.1": true, "gcr.io/distroless/static-debian12:nonroot": true,
		"localhost:5000/x:1.0": true, "busybox": false, "busybox:latest": false,
		"registry:5000/busybox": false, "x@sha256:" + strings.Repeat("a", 64): true, "x@sha256:abc": false,
	} {
		if got := imagePinned(ref); got != want {
			t.Errorf("imagePinned(%q) = %v, want %v", ref, got, want)
		}
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }
