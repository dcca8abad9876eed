package stack

import (
	"context"
	"net/url"
	"sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// databases memoizes Database per test: map[testing.TB]string.
var databases sync.Map

// Database returns the name of the test's own ClickHouse database,
// "t_" + 8 random hex digits, creating it on the first call in the test and
// dropping it (with its tables) when the test ends. Every call in one test
// returns the same database.
func Database(t testing.TB) string {
	t.Helper()
	if db, ok := databases.Load(t); ok {
		return db.(string)
	}
	dsn := ClickHouseDSN(t)
	db := "t_" + randomID(4)
	conn := open(t, dsn)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatalf("stack: creating database %s: %v", db, err)
	}
	databases.Store(t, db)
	t.Cleanup(func() {
		databases.Delete(t)
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		conn := open(t, dsn)
		defer conn.Close()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("stack: dropping database %s: %v", db, err)
		}
	})
	return db
}

// DatabaseDSN returns a clickhouse-go DSN of the test ClickHouse whose
// default database is the test's own ([Database]), so that unqualified table
// names land there.
func DatabaseDSN(t testing.TB) string {
	t.Helper()
	db := Database(t)
	u, err := url.Parse(ClickHouseDSN(t))
	if err != nil {
		t.Fatalf("stack: parsing %s: %v", EnvClickHouse, err)
	}
	u.Path = "/" + db
	return u.String()
}

// ClickHouse returns a native-protocol connection to the test's own
// database ([DatabaseDSN]), closed when the test ends.
func ClickHouse(t testing.TB) driver.Conn {
	t.Helper()
	conn := open(t, DatabaseDSN(t))
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func open(t testing.TB, dsn string) driver.Conn {
	t.Helper()
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("stack: parsing ClickHouse DSN: %v", err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("stack: opening ClickHouse: %v", err)
	}
	return conn
}
