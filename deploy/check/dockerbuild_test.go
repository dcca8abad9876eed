package check

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// TestDockerfileBuildCommand runs the build stage's `go build` line from
// the Dockerfile here (no engine needed for that part), with VERSION set,
// and checks the result: a static ELF (no interpreter, so it runs on
// distroless/static) whose --version is the stamped version.
func TestDockerfileBuildCommand(t *testing.T) {
	var line string
	for _, s := range parseDockerfile(t, "deploy", "docker", "Dockerfile") {
		for _, c := range s.Commands {
			if r, ok := c.(*instructions.RunCommand); ok && strings.Contains(strings.Join(r.CmdLine, " "), "go build") {
				line = strings.Join(r.CmdLine, " ")
			}
		}
	}
	if line == "" {
		t.Fatal("no go build in the Dockerfile")
	}
	out := t.TempDir()
	line = strings.ReplaceAll(line, "/out/hookrelay", filepath.Join(out, "hookrelay"))
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
	cmd.Dir = repo(t)
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-deploycheck")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, b)
	}
	bin := filepath.Join(out, "hookrelay")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is not static and will not run on distroless/static")
		}
	}
	v, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "v0.0.0-deploycheck") {
		t.Errorf("hookrelay --version = %q (%v), want the stamped v0.0.0-deploycheck", v, err)
	}
}
