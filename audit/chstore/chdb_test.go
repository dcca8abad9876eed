package chstore

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// EnvCHDB names the folder holding the PyPI package chdb (a current
// ClickHouse engine, in-process); default: .local/chdb at the repository
// root, where `make deps` (deploy/local/deps.sh chdb) installs it.
const EnvCHDB = "HOOKRELAY_CHDB_DIR"

// TestCurrentEngineSQL runs testdata/clickhouse.sql (every statement the
// store sends, TestSQLGolden) on a current ClickHouse engine through chdb,
// TTL blocks included, and compares each result with the Memory store's:
// the schema and queries must work on current releases as well as on the
// 18.16 server of the local stack. Without chdb it skips, except under
// `make test` (HOOKRELAY_E2E_TARGET=local), where it fails naming `make deps`.
func TestCurrentEngineSQL(t *testing.T) {
	dir := os.Getenv(EnvCHDB)
	if dir == "" {
		dir = filepath.Join("..", "..", ".local", "chdb")
	}
	if _, err := os.Stat(filepath.Join(dir, "chdb")); err != nil {
		if os.Getenv("HOOKRELAY_E2E_TARGET") == "local" {
			t.Fatalf("chdb is not installed in %s (%v): run `make deps` (deploy/local/deps.sh chdb)", dir, err)
		}
		t.Skipf("chdb is not installed in %s: `deploy/local/deps.sh chdb`, or set %s", dir, EnvCHDB)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", filepath.Join("testdata", "chdb_check.py"))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+abs)
	out, err := cmd.CombinedOutput()
	t.Logf("chdb_check.py:\n%s", out)
	if err != nil {
		t.Fatalf("chdb_check.py on a current engine: %v", err)
	}
}
