package chstore

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Test-only access to the ClickHouse store's internals.

// DropDatabase drops the store's database.
func (c *Store) DropDatabase(ctx context.Context) error {
	return c.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+c.db)
}

// RawRowCount counts the attempts table's rows without FINAL: duplicates not
// yet merged count.
func (c *Store) RawRowCount(ctx context.Context) (int64, error) {
	var n uint64
	err := c.conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s.attempts", c.db)).Scan(&n)
	return int64(n), err
}

// Optimize forces the merge that collapses duplicates.
func (c *Store) Optimize(ctx context.Context) error {
	return c.conn.Exec(ctx, fmt.Sprintf("OPTIMIZE TABLE %s.attempts FINAL", c.db))
}

// Exec runs a statement.
func (c *Store) Exec(ctx context.Context, q string) error { return c.conn.Exec(ctx, q) }

var (
	LogSQL     = (*Store).logSQL
	CountSQL   = (*Store).countSQL
	SummarySQL = (*Store).summarySQL
)

// SetNow sets the clock that anchors Log's windows.
func (c *Store) SetNow(now func() time.Time) { c.now = now }

// NewClickHouseForSQL returns a store with no connection, to render SQL.
func NewClickHouseForSQL(db string) *Store { return &Store{db: db} }

// Columns is the attempts table's insert column list.
const Columns = columns

// QueryRow runs q and scans its one row into dest.
func (c *Store) QueryRow(ctx context.Context, q string, dest ...any) error {
	return c.conn.QueryRow(ctx, q).Scan(dest...)
}

// QueryText runs q and returns its rows with every value formatted by
// fmt.Sprint (times in UTC as 2006-01-02 15:04:05, floats rounded to 4
// decimals), for tests that compare results with text.
func (c *Store) QueryText(ctx context.Context, q string) ([][]string, error) {
	rows, err := c.conn.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var dest []any
		for _, ct := range rows.ColumnTypes() {
			dest = append(dest, reflect.New(ct.ScanType()).Interface())
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make([]string, len(dest))
		for i, d := range dest {
			row[i] = textOf(reflect.ValueOf(d).Elem().Interface())
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

func textOf(v any) string {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05")
	case *time.Time:
		if x == nil {
			return "NULL"
		}
		return textOf(*x)
	case float64:
		return strconv.FormatFloat(math.Round(x*1e4)/1e4, 'f', -1, 64)
	case float32:
		return textOf(float64(x))
	case []float32:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = textOf(f)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case []float64:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = textOf(f)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "NULL"
		}
		return textOf(rv.Elem().Interface())
	}
	return fmt.Sprint(v)
}

// Parts sums the active parts of the attempts table (system.parts): their
// count, rows, bytes on disk and column bytes compressed and uncompressed.
func (c *Store) Parts(ctx context.Context) (parts, rows, onDisk, compressed, uncompressed uint64, err error) {
	err = c.conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(), sum(rows), sum(bytes_on_disk), sum(data_compressed_bytes), sum(data_uncompressed_bytes)
FROM system.parts WHERE database = '%s' AND table = 'attempts' AND active`, c.db)).Scan(&parts, &rows, &onDisk, &compressed, &uncompressed)
	return
}

// MigrateUpTo applies the migrations up to version v only (as a binary of
// that version would), recording them.
func (c *Store) MigrateUpTo(ctx context.Context, v int) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	for _, s := range bootstrap {
		if err := c.execDDL(ctx, s); err != nil {
			return err
		}
	}
	for _, m := range ms {
		if m.Version > v {
			break
		}
		for _, s := range m.statements {
			if err := c.execDDL(ctx, s); err != nil {
				return err
			}
		}
		if err := c.recordMigration(ctx, m.Migration); err != nil {
			return err
		}
	}
	return nil
}

// InsertRow inserts one row into the attempts table with the given column
// list (a batch: 18.16 waits for data blocks after a plain INSERT … VALUES).
func (c *Store) InsertRow(ctx context.Context, cols string, row ...any) error {
	b, err := c.conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.attempts (%s)", c.db, cols))
	if err != nil {
		return err
	}
	if err := b.Append(row...); err != nil {
		b.Abort()
		return err
	}
	return b.Send()
}
