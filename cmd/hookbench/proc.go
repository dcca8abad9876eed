package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, 100 on
// every Linux architecture Go supports (proc(5)).
const userHZ = 100

// readProc reads a process's CPU seconds (utime+stime, /proc/<pid>/stat
// fields 14 and 15) and resident set size (VmRSS of /proc/<pid>/status).
func readProc(pid int) (cpu float64, rssKiB int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	cpu, err = parseStatCPU(stat)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	rssKiB, err = parseStatusRSS(status)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return cpu, rssKiB, nil
}

// parseStatCPU returns utime+stime in seconds from the text of
// /proc/<pid>/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' in stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the name", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(ut+st) / userHZ, nil
}

// parseStatusRSS returns VmRSS in KiB from the text of /proc/<pid>/status.
func parseStatusRSS(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, errors.New("no VmRSS line")
}

// sampler reads a set of processes every interval until stopped. Safe for
// concurrent use.
type sampler struct {
	interval time.Duration
	mu       sync.Mutex
	series   map[string][]Sample
	pids     map[string]int
	extra    func(now time.Time) // called after each tick (metrics scrape)
	stop     chan struct{}
	done     chan struct{}
}

func newSampler(interval time.Duration, pids map[string]int, extra func(time.Time)) *sampler {
	s := &sampler{interval: interval, series: map[string][]Sample{}, pids: pids, extra: extra,
		stop: make(chan struct{}), done: make(chan struct{})}
	s.tick(time.Now())
	go s.run()
	return s
}

func (s *sampler) run() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.tick(time.Now())
			return
		case now := <-t.C:
			s.tick(now)
		}
	}
}

func (s *sampler) tick(now time.Time) {
	for name, pid := range s.pids {
		cpu, rss, err := readProc(pid)
		if err != nil {
			continue // exited, or not ours to read
		}
		s.mu.Lock()
		s.series[name] = append(s.series[name], Sample{At: now, CPU: cpu, RSSKiB: rss})
		s.mu.Unlock()
	}
	if s.extra != nil {
		s.extra(now)
	}
}

// Stop takes a last sample and stops the sampler.
func (s *sampler) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// Series returns a copy of one process's samples.
func (s *sampler) Series(name string) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.series[name]...)
}

// Last returns the newest sample of a process.
func (s *sampler) Last(name string) (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ser := s.series[name]
	if len(ser) == 0 {
		return Sample{}, false
	}
	return ser[len(ser)-1], true
}

// metricSet is one scrape of a Prometheus text exposition.
type metricSet map[string]*dto.MetricFamily

// opsClient talks to hookrelay's ops address.
var opsClient = &http.Client{Timeout: 5 * time.Second}

// scrapeMetrics reads hookrelay's /metrics.
func scrapeMetrics(ctx context.Context, addr string) (metricSet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := opsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", res.Status)
	}
	return parseMetrics(res.Body)
}

// parseMetrics parses a Prometheus text exposition.
func parseMetrics(r io.Reader) (metricSet, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return metricSet(fams), nil
}

// Sum is a counter's or gauge's value summed over its label sets; for a
// histogram, its sample count. An absent metric is 0.
func (ms metricSet) Sum(name string) float64 {
	var v float64
	for _, x := range ms.By(name, "") {
		v += x
	}
	return v
}

// By sums a metric per value of one label (label "" puts everything under
// ""): e.g. hookrelay_attempts_total by outcome.
func (ms metricSet) By(name, label string) map[string]float64 {
	out := map[string]float64{}
	f, ok := ms[name]
	if !ok {
		return out
	}
	for _, m := range f.GetMetric() {
		key := ""
		for _, lp := range m.GetLabel() {
			if label != "" && lp.GetName() == label {
				key = lp.GetValue()
			}
		}
		switch {
		case m.Counter != nil:
			out[key] += m.Counter.GetValue()
		case m.Gauge != nil:
			out[key] += m.Gauge.GetValue()
		case m.Untyped != nil:
			out[key] += m.Untyped.GetValue()
		case m.Histogram != nil:
			out[key] += float64(m.Histogram.GetSampleCount())
		}
	}
	return out
}
