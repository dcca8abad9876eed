package faults

// TCP fault proxies: the toxiproxy library's proxy, run inside the test
// process (no toxiproxy server or CLI).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

var toxServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	// Some toxics log through zerolog's global logger, at trace level.
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
})

// newProxy starts a proxy from listen (host:port; port 0 for any) to
// upstream, stopped when the test ends. Its Listen field is the address it
// listens on.
func newProxy(t testing.TB, name, listen, upstream string) *toxiproxy.Proxy {
	t.Helper()
	p := toxiproxy.NewProxy(toxServer(), name, listen, upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("faults: proxy %s %s -> %s: %v", name, listen, upstream, err)
	}
	t.Cleanup(p.Stop)
	return p
}

// addToxic adds a toxic to p, e.g. addToxic(t, p, "latency", "downstream",
// 1, `"latency":200,"jitter":100`).
func addToxic(t testing.TB, p *toxiproxy.Proxy, typ, stream string, toxicity float64, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":%g,"attributes":{%s}}`,
		typ+"_"+stream, typ, stream, toxicity, attrs)
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("faults: toxic %s on %s: %v", js, p.Name, err)
	}
}

// clearToxics removes every toxic of p.
func clearToxics(p *toxiproxy.Proxy) { p.Toxics.ResetToxics(context.Background()) }
