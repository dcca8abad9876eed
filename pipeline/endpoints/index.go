package endpoints

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// maxCachedTypes bounds the per-tenant cache of Match results, so a stream
// of ever-new event types cannot grow memory without bound; past it, results
// are computed on every call (still fast, see tenantIndex.compute).
const maxCachedTypes = 4096

// snapshot is one immutable state of a View (but for the memo of Match
// results in its tenant indexes). Readers load it atomically;
// the View's Run goroutine builds a new one for every batch of records that
// changes anything (copy-on-write), so reads never wait for a lock.
type snapshot struct {
	byID    map[string]*Endpoint    // every endpoint, with Version and PipelineStatus
	tenants map[string]*tenantIndex // every endpoint by TenantID ("" = no tenant), whatever its status
}

func emptySnapshot() *snapshot {
	return &snapshot{byID: map[string]*Endpoint{}, tenants: map[string]*tenantIndex{}}
}

// matchResult is one cached match: every subscribed endpoint, and the active
// ones among them.
type matchResult struct {
	all, active []*Endpoint
}

// tenantIndex finds the endpoints of one tenant whose patterns match
// an event type: a map of exact types, a map of wildcard prefixes probed at
// each distinct prefix length, and the "*" list. Results are cached per
// event type, sorted by ID and deduplicated.
type tenantIndex struct {
	exact      map[string][]*Endpoint
	prefix     map[string][]*Endpoint // pattern without its final "*"
	prefixLens []int                  // distinct len(prefix), ascending
	all        []*Endpoint            // pattern "*"

	cache  sync.Map     // event type -> matchResult; lock-free loads
	cached atomic.Int32 // entries in cache, at most maxCachedTypes
}

// buildIndex indexes every endpoint of byID (active or not: fan-out records
// the matches it does not send).
func buildIndex(byID map[string]*Endpoint) map[string]*tenantIndex {
	tenants := make(map[string]*tenantIndex)
	for _, e := range byID {
		ti := tenants[e.TenantID]
		if ti == nil {
			ti = &tenantIndex{exact: map[string][]*Endpoint{}, prefix: map[string][]*Endpoint{}}
			tenants[e.TenantID] = ti
		}
		for _, p := range e.EventTypes {
			switch {
			case p == WildcardAll:
				ti.all = append(ti.all, e)
			case strings.HasSuffix(p, wildcardSuffix):
				pre := p[:len(p)-len(wildcardSuffix)]
				ti.prefix[pre] = append(ti.prefix[pre], e)
			default:
				ti.exact[p] = append(ti.exact[p], e)
			}
		}
	}
	for _, ti := range tenants {
		for pre := range ti.prefix {
			if !slices.Contains(ti.prefixLens, len(pre)) {
				ti.prefixLens = append(ti.prefixLens, len(pre))
			}
		}
		slices.Sort(ti.prefixLens)
	}
	return tenants
}

// match returns the sorted, deduplicated endpoints of the tenant that match
// eventType, all and active. The slices are shared: callers must not modify
// them.
func (s *snapshot) match(eventType, tenant string) matchResult {
	ti := s.tenants[tenant]
	if ti == nil {
		return matchResult{}
	}
	if r, ok := ti.cache.Load(eventType); ok {
		return r.(matchResult)
	}
	r := matchResult{all: ti.compute(eventType)}
	for _, e := range r.all {
		if e.Active() {
			r.active = append(r.active, e)
		}
	}
	if len(r.active) == len(r.all) {
		r.active = r.all
	}
	if ti.cached.Add(1) <= maxCachedTypes {
		if _, loaded := ti.cache.LoadOrStore(eventType, r); loaded {
			ti.cached.Add(-1)
		}
	} else {
		ti.cached.Add(-1)
	}
	return r
}

func (ti *tenantIndex) compute(eventType string) []*Endpoint {
	var out []*Endpoint
	out = append(out, ti.exact[eventType]...)
	for _, n := range ti.prefixLens {
		// A prefix pattern needs at least one more character: "invoice.*"
		// does not match "invoice.".
		if n >= len(eventType) {
			break
		}
		out = append(out, ti.prefix[eventType[:n]]...)
	}
	out = append(out, ti.all...)
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b *Endpoint) int { return strings.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b *Endpoint) bool { return a == b })
}
