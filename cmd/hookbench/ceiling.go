package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CeilingResult is scenario 8: what this machine can do at all, a plain
// HTTP load generator posting 1 KiB bodies to the same receiver code.
type CeilingResult struct {
	Tool           string                 `json:"tool"` // "wrk" or "go"
	Connections    int                    `json:"connections"`
	Seconds        float64                `json:"duration_s"`
	BodyBytes      int                    `json:"body_bytes"`
	RequestsPerSec float64                `json:"requests_per_s"`
	ReceiverOK     int64                  `json:"receiver_2xx"`
	LatencyP50     string                 `json:"latency_p50,omitempty"`
	LatencyP99     string                 `json:"latency_p99,omitempty"`
	Errors         string                 `json:"errors,omitempty"`
	Processes      map[string]procFigures `json:"processes"`
}

var (
	wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkPct  = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.000)?%\s+(\S+)`)
	wrkErrs = regexp.MustCompile(`(?m)^\s+(Socket errors:.*|Non-2xx or 3xx responses:.*)$`)
)

// runCeiling is scenario 8: wrk (Debian package, `make deps`) with two
// threads, or a Go loop when wrk is missing, against one in-process receiver
// of the kind every other scenario uses.
func (b *bench) runCeiling(ctx context.Context) (*CeilingResult, error) {
	o := b.o
	res := &CeilingResult{Connections: o.s8Connections, Seconds: o.s8Duration.Seconds(), BodyBytes: 1024}
	r, err := startReceiver("ceiling", Behaviour{}, o.verifyEvery)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	pids := map[string]int{}
	for k, v := range b.stack {
		pids[k] = v
	}
	smp := newSampler(o.sample, pids, nil)
	defer smp.Stop()
	start := time.Now()
	wrk, lookErr := exec.LookPath(o.wrk)
	if lookErr == nil {
		res.Tool = "wrk"
		b.logf("scenario 8 (ceiling): wrk -t2 -c%d -d%s, 1 KiB POST to %s", o.s8Connections, o.s8Duration, r.url)
		script := filepath.Join(o.runDir, "wrk-post.lua")
		lua := "wrk.method = \"POST\"\nwrk.body = string.rep(\"x\", 1024)\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
		if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
			return nil, err
		}
		secs := strconv.Itoa(int(o.s8Duration.Seconds()))
		cmd := exec.CommandContext(ctx, wrk, "-t2", "-c"+strconv.Itoa(o.s8Connections), "-d"+secs+"s", "--latency", "-s", script, r.url)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("wrk: %v\n%s", err, out)
		}
		if m := wrkRate.FindSubmatch(out); m != nil {
			res.RequestsPerSec, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		for _, m := range wrkPct.FindAllSubmatch(out, -1) {
			if string(m[1]) == "50" {
				res.LatencyP50 = string(m[2])
			} else {
				res.LatencyP99 = string(m[2])
			}
		}
		var errs []string
		for _, m := range wrkErrs.FindAllSubmatch(out, -1) {
			errs = append(errs, strings.TrimSpace(string(m[1])))
		}
		res.Errors = strings.Join(errs, "; ")
	} else {
		res.Tool = "go"
		b.logf("scenario 8 (ceiling): wrk not found (%v); Go loop with %d connections for %s", lookErr, o.s8Connections, o.s8Duration)
		res.RequestsPerSec = goLoad(ctx, r.url, o.s8Connections, o.s8Duration)
	}
	end := time.Now()
	smp.Stop()
	res.RequestsPerSec = round1(res.RequestsPerSec)
	res.ReceiverOK = r.ok.Load()
	res.Processes = map[string]procFigures{}
	for name := range pids {
		ser := smp.Series(name)
		cpu := cpuBetween(ser, start, end)
		res.Processes[name] = procFigures{CPUSeconds: round3(cpu), Cores: round3(cpu / end.Sub(start).Seconds()), PeakRSSMiB: round1(float64(peakRSS(ser, start, end)) / 1024)}
	}
	b.logf("  => %.0f requests/s (%s, p50 %s, p99 %s); receiver answered %d; %s", res.RequestsPerSec, res.Tool, res.LatencyP50, res.LatencyP99, res.ReceiverOK, res.Errors)
	return res, nil
}

// goLoad posts 1 KiB bodies from conns goroutines (one keep-alive
// connection each) for d and returns requests per second.
func goLoad(ctx context.Context, url string, conns int, d time.Duration) float64 {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	body := bytes.Repeat([]byte("x"), 1024)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				res, err := cl.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode < 300 {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}
