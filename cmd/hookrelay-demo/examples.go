package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// examplesPackage is where `npm ci` in e2e/receiver puts the real GitHub
// webhook payloads, relative to the receiver directory.
const examplesPackage = "node_modules/@octokit/webhooks-examples"

// exampleIndexes are the JSON index files of @octokit/webhooks-examples, in
// the order they are read: the package's main export (GitHub.com) first, then
// the GitHub Enterprise Server versions. Each is an array of
// {name, actions, description, properties, examples: [payload, ...]}
// (see the package's index.d.ts).
var exampleIndexes = []string{
	"api.github.com", "ghes-31", "ghes-32", "ghes-33", "ghes-34", "ghes-35",
}

// fallbackSource is the CloudEvent source of a payload without a repository.
const fallbackSource = "https://github.com/octokit/webhooks-examples"

// demoEvent is one GitHub webhook payload as the CloudEvent the demo
// publishes.
type demoEvent struct {
	ID     string          // stable and unique: "<index>/<event name>/<n>", n counting from 0 per index and name
	Source string          // "https://github.com/<repository.full_name>", else fallbackSource
	Type   string          // "<event name>.<action>", or "<event name>" when the payload has no action
	Data   json.RawMessage // the payload, compacted
	Binary bool            // publish in binary content mode (ce_* headers) instead of structured
}

type exampleDefinition struct {
	Name     string            `json:"name"`
	Examples []json.RawMessage `json:"examples"`
}

type examplePayload struct {
	Action     *string `json:"action"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// loadExamples reads every index of the package at dir and returns one
// demoEvent per distinct payload (the GHES indexes repeat many GitHub.com
// payloads byte for byte; a repeat is skipped and counted in dups). Every
// binaryEvery-th event (0: none) is marked for binary mode.
func loadExamples(dir string, binaryEvery int) (evs []demoEvent, dups int, err error) {
	seen := make(map[[sha256.Size]byte]bool)
	for _, index := range exampleIndexes {
		path := filepath.Join(dir, index, "index.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			if index != exampleIndexes[0] && os.IsNotExist(err) {
				continue // an older or newer package without this GHES version
			}
			return nil, 0, fmt.Errorf("read GitHub webhook examples: %w (run `make deps`, or `npm ci` in e2e/receiver)", err)
		}
		var defs []exampleDefinition
		if err := json.Unmarshal(raw, &defs); err != nil {
			return nil, 0, fmt.Errorf("decode %s: %w", path, err)
		}
		for _, def := range defs {
			if def.Name == "" {
				return nil, 0, fmt.Errorf("decode %s: a definition without a name", path)
			}
			for n, ex := range def.Examples {
				ev, err := newDemoEvent(index+"/"+def.Name+"/"+strconv.Itoa(n), def.Name, ex)
				if err != nil {
					return nil, 0, fmt.Errorf("%s: %w", path, err)
				}
				sum := sha256.Sum256(ev.Data)
				if seen[sum] {
					dups++
					continue
				}
				seen[sum] = true
				evs = append(evs, ev)
			}
		}
	}
	if len(evs) == 0 {
		return nil, 0, fmt.Errorf("no GitHub webhook examples under %s", dir)
	}
	if binaryEvery > 0 {
		for i := range evs {
			if i%binaryEvery == binaryEvery-1 {
				evs[i].Binary = true
			}
		}
	}
	return evs, dups, nil
}

// newDemoEvent makes the CloudEvent of one payload of GitHub event name.
func newDemoEvent(id, name string, payload json.RawMessage) (demoEvent, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, payload); err != nil {
		return demoEvent{}, fmt.Errorf("example %s: %w", id, err)
	}
	var p examplePayload
	if err := json.Unmarshal(compact.Bytes(), &p); err != nil {
		return demoEvent{}, fmt.Errorf("example %s: not a JSON object: %w", id, err)
	}
	ev := demoEvent{ID: id, Source: fallbackSource, Type: name, Data: slices.Clip(compact.Bytes())}
	if p.Repository != nil && p.Repository.FullName != "" {
		ev.Source = "https://github.com/" + p.Repository.FullName
	}
	if p.Action != nil && *p.Action != "" {
		ev.Type = name + "." + *p.Action
	}
	return ev, nil
}
