package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// deleteRun deletes the run's Kafka topics and consumer groups (every one
// whose name starts with prefix), so repeated demos do not pile up
// partitions on the local broker. The ClickHouse database stays: it is small
// and `hookrelay log` reads it. It returns how many topics and groups it
// deleted. A group that still has members (a static member stays until its
// session times out) is not deleted and not an error: the broker drops it
// once it is empty and its offsets expire.
func deleteRun(ctx context.Context, cl *kgo.Client, prefix string) (topics, groups int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("list topics: %w", err)
	}
	var doomed []string
	for _, name := range listed.Names() {
		if strings.HasPrefix(name, prefix) {
			doomed = append(doomed, name)
		}
	}
	if len(doomed) > 0 {
		resps, err := adm.DeleteTopics(ctx, doomed...)
		if err == nil {
			err = resps.Error()
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, 0, fmt.Errorf("delete topics %v: %w", doomed, err)
		}
	}
	gl, err := adm.ListGroups(ctx)
	if err != nil {
		return len(doomed), 0, fmt.Errorf("list groups: %w", err)
	}
	var doomedGroups []string
	for _, g := range gl.Groups() {
		if strings.HasPrefix(g, prefix) {
			doomedGroups = append(doomedGroups, g)
		}
	}
	if len(doomedGroups) > 0 {
		resps, err := adm.DeleteGroups(ctx, doomedGroups...)
		if err != nil {
			return len(doomed), 0, fmt.Errorf("delete groups: %w", err)
		}
		for g, r := range resps {
			switch {
			case r.Err == nil:
				groups++
			case errors.Is(r.Err, kerr.GroupIDNotFound), errors.Is(r.Err, kerr.NonEmptyGroup):
			default:
				return len(doomed), groups, fmt.Errorf("delete group %s: %w", g, r.Err)
			}
		}
	}
	return len(doomed), groups, nil
}
