package check

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// parseDockerfile parses a Dockerfile with BuildKit's own parser and returns
// its stages with the global ARG defaults substituted into FROM.
func parseDockerfile(t *testing.T, parts ...string) []instructions.Stage {
	t.Helper()
	f, err := os.Open(repo(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("parse %s: %v", strings.Join(parts, "/"), err)
	}
	for _, w := range res.Warnings {
		t.Errorf("%s: parser warning: %s", strings.Join(parts, "/"), w.Short)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("instructions %s: %v", strings.Join(parts, "/"), err)
	}
	for i := range stages {
		for _, a := range metaArgs {
			for _, kv := range a.Args {
				if kv.Value != nil {
					stages[i].BaseName = strings.ReplaceAll(stages[i].BaseName, "${"+kv.Key+"}", *kv.Value)
				}
			}
		}
	}
	return stages
}

// checkCommon asserts what every Dockerfile of the project must satisfy:
// pinned base images (no latest, no untagged) and a non-root numeric USER in
// the final stage.
func checkCommon(t *testing.T, name string, stages []instructions.Stage) {
	t.Helper()
	named := map[string]bool{}
	for _, s := range stages {
		if !named[strings.ToLower(s.BaseName)] && !imagePinned(s.BaseName) {
			t.Errorf("%s: FROM %s is not pinned (a tag other than latest, or a digest)", name, s.BaseName)
		}
		if s.Name != "" {
			named[strings.ToLower(s.Name)] = true
		}
	}
	final := stages[len(stages)-1]
	var user string
	for _, c := range final.Commands {
		if u, ok := c.(*instructions.UserCommand); ok {
			user = u.User
		}
	}
	if !regexp.MustCompile(`^[1-9][0-9]*(:[1-9][0-9]*)?$`).MatchString(user) {
		t.Errorf("%s: final stage USER = %q, want a numeric non-root uid[:gid] (runAsNonRoot can verify only numbers)", name, user)
	}
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, "deploy", "docker", "Dockerfile")
	checkCommon(t, "Dockerfile", stages)
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a multi-stage build", len(stages))
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static") {
		t.Errorf("final base %q, want distroless/static (the binary is static)", final.BaseName)
	}
	var build, copied, healthNone bool
	for _, s := range stages[:len(stages)-1] {
		for _, c := range s.Commands {
			r, ok := c.(*instructions.RunCommand)
			if !ok {
				continue
			}
			line := strings.Join(r.CmdLine, " ")
			if strings.Contains(line, "go build") {
				build = true
				for _, want := range []string{"CGO_ENABLED=0", "-X main.version=${VERSION}", "./cmd/hookrelay"} {
					if !strings.Contains(line, want) {
						t.Errorf("go build line lacks %q: %s", want, line)
					}
				}
			}
		}
	}
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			copied = copied || c.From != ""
		case *instructions.HealthCheckCommand:
			// distroless has no shell or HTTP client: the choice is an
			// explicit NONE, and the probes live in the chart.
			healthNone = len(c.Health.Test) == 1 && c.Health.Test[0] == "NONE"
		case *instructions.RunCommand:
			t.Errorf("final stage has RUN %v: distroless has no shell", c.CmdLine)
		}
	}
	if !build {
		t.Error("no build stage runs go build")
	}
	if !copied {
		t.Error("final stage copies nothing from a build stage")
	}
	if !healthNone {
		t.Error("final stage lacks HEALTHCHECK NONE (the explicit choice: nothing in distroless can probe)")
	}
	// The version the build stamps is the variable the binary has.
	if !strings.Contains(readFile(t, "cmd", "hookrelay", "main.go"), "\nvar version = ") {
		t.Error("cmd/hookrelay/main.go has no `var version`, which -X main.version sets")
	}
	ignore := readFile(t, "deploy", "docker", "Dockerfile.dockerignore")
	for _, want := range []string{".git", ".local", "**/node_modules"} {
		if !strings.Contains("\n"+ignore+"\n", "\n"+want+"\n") {
			t.Errorf("Dockerfile.dockerignore lacks %q", want)
		}
	}
}

func TestReceiverDockerfile(t *testing.T) {
	checkCommon(t, "receiver.Dockerfile", parseDockerfile(t, "deploy", "compose", "receiver.Dockerfile"))
}
