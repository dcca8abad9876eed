package endpoints

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// population builds n endpoints with a realistic mix of filters: exact
// types, prefix wildcards, "*", tenants and no tenant; every 13th is
// disabled by the operator and every 17th by the pipeline.
func population(n int, seed uint64) (map[string]*Endpoint, []string, []string) {
	rnd := rand.New(rand.NewPCG(seed, seed))
	domains := []string{"invoice", "customer", "charge", "payout", "github.pull_request", "github.issues", "github.push", "com.example.order"}
	actions := []string{"created", "paid", "updated", "deleted", "opened", "closed", "synchronize", "failed"}
	var types []string
	for _, d := range domains {
		for _, a := range actions {
			types = append(types, d+"."+a)
		}
	}
	types = append(types, "invoice", "invoice.", "github.pull_request.review.submitted", "unknown.type")
	tenants := []string{""}
	for i := range 100 {
		tenants = append(tenants, fmt.Sprintf("tenant-%03d", i))
	}
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	byID := make(map[string]*Endpoint, n)
	for i := range n {
		e := &Endpoint{ID: fmt.Sprintf("ep-%05d", i), Status: Active, Version: int64(i + 1)}
		if rnd.IntN(3) > 0 {
			e.TenantID = tenants[1+rnd.IntN(len(tenants)-1)]
		}
		for range 1 + rnd.IntN(3) {
			switch r := rnd.IntN(10); {
			case r < 5:
				e.EventTypes = append(e.EventTypes, types[rnd.IntN(len(types))])
			case r < 9:
				e.EventTypes = append(e.EventTypes, domains[rnd.IntN(len(domains))]+".*")
			default:
				e.EventTypes = append(e.EventTypes, "*")
			}
		}
		if i%13 == 0 {
			e.Status = Disabled
		}
		if i%17 == 0 {
			e.PipelineStatus = &Status{State: Disabled, Reason: ReasonGone, At: at, ConfigVersion: e.Version}
		}
		byID[e.ID] = e
	}
	return byID, types, tenants
}

// bruteForce is the definition Match must agree with.
func bruteForce(byID map[string]*Endpoint, eventType, tenant string, activeOnly bool) []string {
	var ids []string
	for _, e := range byID {
		if (e.Active() || !activeOnly) && e.Matches(eventType, tenant) {
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func TestMatchAgreesWithMatches(t *testing.T) {
	byID, types, tenants := population(2000, 1)
	s := &snapshot{byID: byID, tenants: buildIndex(byID)}
	var nonEmpty int
	for round := range 2 { // the second round is served from the cache
		for _, tenant := range append(tenants, "no-such-tenant") {
			for _, typ := range append(types, "", "*", "invoice.paid.v2") {
				var got, gotAll []string
				for _, e := range s.match(typ, tenant).active {
					got = append(got, e.ID)
				}
				for _, e := range s.match(typ, tenant).all {
					gotAll = append(gotAll, e.ID)
				}
				want := bruteForce(byID, typ, tenant, true)
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: match(%q, %q) = %v, want %v", round, typ, tenant, got, want)
				}
				if wantAll := bruteForce(byID, typ, tenant, false); !slices.Equal(gotAll, wantAll) {
					t.Fatalf("round %d: match(%q, %q).all = %v, want %v", round, typ, tenant, gotAll, wantAll)
				}
				if round == 0 && len(want) > 0 {
					nonEmpty++
				}
			}
		}
	}
	if nonEmpty < 100 {
		t.Errorf("only %d non-empty results: the population does not exercise matching", nonEmpty)
	}
}

func TestMatchCacheBound(t *testing.T) {
	byID := map[string]*Endpoint{"a": {ID: "a", Status: Active, EventTypes: []string{"*"}}}
	s := &snapshot{byID: byID, tenants: buildIndex(byID)}
	for i := range maxCachedTypes + 100 {
		if got := s.match(fmt.Sprintf("type-%d", i), "").active; len(got) != 1 {
			t.Fatalf("match = %v", got)
		}
	}
	if n := s.tenants[""].cached.Load(); n != maxCachedTypes {
		t.Errorf("cache holds %d types, want %d", n, maxCachedTypes)
	}
}

// BenchmarkMatch measures View.Match over 4,000 endpoints (a third without
// tenant, the rest over 100 tenants): "cached" is the steady state, "cold"
// computes every result (index lookups, sort, dedupe) as for a type seen
// for the first time.
func BenchmarkMatch(b *testing.B) {
	byID, types, tenants := population(4000, 2)
	s := &snapshot{byID: byID, tenants: buildIndex(byID)}
	type q struct{ typ, tenant string }
	qs := make([]q, 0, 4096)
	rnd := rand.New(rand.NewPCG(3, 3))
	for range 4096 {
		qs = append(qs, q{types[rnd.IntN(len(types))], tenants[rnd.IntN(len(tenants))]})
	}
	b.Run("cached", func(b *testing.B) {
		for _, x := range qs {
			s.match(x.typ, x.tenant)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x := qs[i%len(qs)]
			s.match(x.typ, x.tenant)
			i++
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x := qs[i%len(qs)]
			if ti := s.tenants[x.tenant]; ti != nil {
				ti.compute(x.typ)
			}
			i++
		}
	})
	b.Run("no-tenant-busy", func(b *testing.B) {
		// The tenant "" holds ~1,300 endpoints: the largest result sets.
		ti := s.tenants[""]
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ti.compute(types[i%len(types)])
			i++
		}
	})
}

func BenchmarkBuildIndex(b *testing.B) {
	byID, _, _ := population(4000, 4)
	b.ReportAllocs()
	for b.Loop() {
		buildIndex(byID)
	}
}

func TestPopulationIsValid(t *testing.T) {
	byID, _, _ := population(50, 5)
	for _, e := range byID {
		c := e.Clone()
		c.URL, c.Secrets = "https://x.example", []Secret{{Value: secretA}}
		c.SetDefaults()
		if err := c.Validate(); err != nil && !strings.Contains(err.Error(), "status") {
			t.Fatalf("%s: %v", e.ID, err)
		}
	}
}
