package chstore

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Migration is one versioned schema change of the ClickHouse store. Its SQL
// lives in audit/migrations/NNNN_name.sql (embedded in the binary); the
// placeholder {db} stands for the database.
type Migration struct {
	Version int    // 1, 2, …: applied in this order
	Name    string // from the file name, e.g. "create_attempts"
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	Migration
	statements []string
}

var migrationFile = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// loadMigrations parses the embedded migration files, ordered by version.
// Statements in a file are separated by a ';' at the end of a line.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("audit: migration file %q: want NNNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{Migration: Migration{Version: v, Name: m[2]}, statements: splitStatements(string(b))})
	}
	slices.SortFunc(ms, func(a, b migration) int { return cmp.Compare(a.Version, b.Version) })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("audit: migration %04d_%s: versions must be 1, 2, … without gaps", m.Version, m.Name)
		}
		if len(m.statements) == 0 {
			return nil, fmt.Errorf("audit: migration %04d_%s has no statement", m.Version, m.Name)
		}
	}
	return ms, nil
}

var statementEnd = regexp.MustCompile(`;[ \t]*(\n|$)`)

func splitStatements(sql string) []string {
	var out []string
	for _, s := range statementEnd.Split(sql, -1) {
		code := false
		for _, line := range strings.Split(s, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
				code = true
				break
			}
		}
		if code {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// Migrations lists every migration this binary knows, in order.
func Migrations() []Migration {
	ms, err := loadMigrations()
	if err != nil {
		panic(err) // the embedded files are checked by TestMigrationFiles
	}
	out := make([]Migration, len(ms))
	for i, m := range ms {
		out[i] = m.Migration
	}
	return out
}

// ClickHouse error codes that mean "already done": a statement failing with
// one of them counts as applied, so Migrate tolerates a concurrent Migrate and
// 18.16's lack of ADD COLUMN IF NOT EXISTS.
var alreadyApplied = []int32{
	15, // DUPLICATE_COLUMN
	44, // ILLEGAL_COLUMN: "column with this name already exists" on ADD COLUMN
	57, // TABLE_ALREADY_EXISTS
	82, // DATABASE_ALREADY_EXISTS
}

// bootstrap creates the database and the migrations table; Migrate runs it
// before reading the schema version.
var bootstrap = []string{
	"CREATE DATABASE IF NOT EXISTS {db}",
	`CREATE TABLE IF NOT EXISTS {db}.schema_migrations
(
    version    UInt32,
    name       String,
    applied_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY version`,
}

// Migrate brings the database to the latest schema: it creates the database
// and the schema_migrations table if missing, then applies every pending
// migration in version order, recording each in schema_migrations (version,
// name, applied_at) after its statements succeed. It returns the migrations
// it applied (none when the schema was current). A database migrated by a
// newer binary is left alone and is not an error: migrations only add.
//
// Migrate is idempotent. ClickHouse has no transactions or locks, so instead
// every statement is written to be repeatable (IF NOT EXISTS where both 18.16
// and current ClickHouse have it), and a statement failing with an
// "already exists" error counts as applied. Two processes migrating at once
// (e.g. two replicas starting) therefore both succeed; a version may be
// recorded twice, which schema_migrations (a ReplacingMergeTree keyed by
// version) collapses. A migration interrupted half-way is re-run whole by
// the next Migrate.
func (c *Store) Migrate(ctx context.Context) ([]Migration, error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	for _, s := range bootstrap {
		if err := c.execDDL(ctx, s); err != nil {
			return nil, fmt.Errorf("audit: migrate %s: %w", c.db, err)
		}
	}
	current, err := c.SchemaVersion(ctx)
	if err != nil {
		return nil, err
	}
	var applied []Migration
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		for _, s := range m.statements {
			if err := c.execDDL(ctx, s); err != nil {
				return applied, fmt.Errorf("audit: migration %04d_%s: %w", m.Version, m.Name, err)
			}
		}
		if err := c.recordMigration(ctx, m.Migration); err != nil {
			return applied, fmt.Errorf("audit: record migration %04d_%s: %w", m.Version, m.Name, err)
		}
		applied = append(applied, m.Migration)
	}
	return applied, nil
}

// recordMigration inserts m's row into schema_migrations. (A batch: 18.16
// waits for data blocks after an INSERT … VALUES sent over the native
// protocol as a plain query.)
func (c *Store) recordMigration(ctx context.Context, m Migration) error {
	b, err := c.conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.schema_migrations (version, name, applied_at)", c.db))
	if err != nil {
		return err
	}
	if err := b.Append(uint32(m.Version), m.Name, time.Now().Unix()); err != nil {
		b.Abort()
		return err
	}
	return b.Send()
}

// SchemaVersion returns the highest migration version recorded in the
// database, 0 when none is (or schema_migrations does not exist yet).
func (c *Store) SchemaVersion(ctx context.Context) (int, error) {
	var exists uint8
	q := fmt.Sprintf("SELECT count() > 0 FROM system.tables WHERE database = %s AND name = 'schema_migrations'", quote(c.db))
	if err := c.conn.QueryRow(ctx, q).Scan(&exists); err != nil {
		return 0, fmt.Errorf("audit: read schema version: %w", err)
	}
	if exists == 0 {
		return 0, nil
	}
	var v uint32
	if err := c.conn.QueryRow(ctx, fmt.Sprintf("SELECT max(version) FROM %s.schema_migrations", c.db)).Scan(&v); err != nil {
		return 0, fmt.Errorf("audit: read schema version: %w", err)
	}
	return int(v), nil
}

func (c *Store) execDDL(ctx context.Context, stmt string) error {
	err := c.conn.Exec(ctx, strings.ReplaceAll(stmt, "{db}", c.db))
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && slices.Contains(alreadyApplied, ex.Code) {
		return nil
	}
	return err
}
