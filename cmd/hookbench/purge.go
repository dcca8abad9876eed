package main

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// Names hookbench gives its topics and databases: "hb<unix><scenario>." and
// "hb_<unix>_<scenario>".
var (
	benchTopic = regexp.MustCompile(`^hb[0-9]{10}s[0-9a-z]+\.`)
	benchDB    = regexp.MustCompile(`^hb_[0-9]{10}_s[0-9a-z_]+$`)
)

// purge deletes what earlier runs left behind (-keep, or an interrupted run):
// every topic and ClickHouse database named like hookbench's.
func (b *bench) purge(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	topics, err := b.adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	var old []string
	for _, t := range topics.Names() {
		if benchTopic.MatchString(t) {
			old = append(old, t)
		}
	}
	deleted := len(old)
	for len(old) > 0 {
		n := min(len(old), 200)
		if _, err := b.adm.DeleteTopics(ctx, old[:n]...); err != nil {
			return fmt.Errorf("delete topics: %w", err)
		}
		old = old[n:]
	}
	rows, err := b.ch.Query(ctx, "SELECT name FROM system.databases")
	if err != nil {
		return err
	}
	var dbs []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		if benchDB.MatchString(name) {
			dbs = append(dbs, name)
		}
	}
	rows.Close()
	for _, db := range dbs {
		if err := b.ch.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			return fmt.Errorf("drop %s: %w", db, err)
		}
	}
	b.logf("purge: deleted %d topics and %d databases of earlier hookbench runs", deleted, len(dbs))
	return nil
}
