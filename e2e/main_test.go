package e2e

import (
	"os"
	"testing"

	"github.com/hookrelay/hookrelay/e2e/stack"
)

// TestMain terminates the containers that package stack may have started
// (only when HOOKRELAY_BROKERS / HOOKRELAY_CLICKHOUSE are unset and a Docker
// daemon answers) once every test of the package has run.
func TestMain(m *testing.M) { os.Exit(stack.Main(m)) }
