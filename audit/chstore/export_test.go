package chstore

import (
	"context"
	"fmt"
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

// Parts sums the active parts of the attempts table (system.parts): their
// count, rows, bytes on disk and column bytes compressed and uncompressed.
func (c *Store) Parts(ctx context.Context) (parts, rows, onDisk, compressed, uncompressed uint64, err error) {
	err = c.conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(), sum(rows), sum(bytes_on_disk), sum(data_compressed_bytes), sum(data_uncompressed_bytes)
FROM system.parts WHERE database = '%s' AND table = 'attempts' AND active`, c.db)).Scan(&parts, &rows, &onDisk, &compressed, &uncompressed)
	return
}
