package faults

// The hookrelay binary as a subprocess: build once, start an instance,
// SIGKILL or SIGTERM it, and restart it as a supervisor would.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	readyTimeout = 90 * time.Second // start to /readyz 200 (a group rejoin after SIGKILL included)
	stopTimeout  = 25 * time.Second // SIGTERM to exit before SIGKILL
)

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// hookrelayBinary builds ./cmd/hookrelay once per test binary into a
// temporary folder that TestMain removes.
func hookrelayBinary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "hookrelay-faults-bin-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "hookrelay")
		out, err := exec.Command("go", "build", "-o", binary.path, "github.com/hookrelay/hookrelay/cmd/hookrelay").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build ./cmd/hookrelay: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatalf("faults: %v", binary.err)
	}
	return binary.path
}

func removeBinary() {
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
}

// relay is one `hookrelay run` process (one incarnation of an instance).
type relay struct {
	id       string
	cmd      *exec.Cmd
	logPath  string
	httpAddr string
	done     chan struct{} // closed when the process has exited
	waitErr  error         // valid after done
	dumps    int           // goroutine dumps saved so far (dumpGoroutines)
}

// exited reports whether the process has exited.
func (p *relay) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *relay) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop sends SIGTERM, waits up to stopTimeout, then SIGKILLs. It returns
// the exit error (nil for a clean exit).
func (p *relay) stop() error {
	if p.exited() {
		return p.waitErr
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	return p.waitErr
}

// launch starts `hookrelay run` as instance id and returns at once.
func (r *rig) launch(id string) (*relay, error) {
	r.launched++
	p := &relay{
		id:       id,
		logPath:  filepath.Join(r.logDir, fmt.Sprintf("hookrelay-%03d-%s.log", r.launched, id)),
		httpAddr: freeAddr(r.t),
		done:     make(chan struct{}),
	}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = r.command(context.Background(), "run")
	p.cmd.Env = append(p.cmd.Env, "HOOKRELAY_INSTANCE_ID="+id, "HOOKRELAY_HTTP_ADDR="+p.httpAddr,
		"HOOKRELAY_API_ADDR=127.0.0.1:0") // any free port: several instances run side by side
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { // owner: p; every rig stops its relays in a cleanup
		p.waitErr = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	r.mu.Lock()
	r.all = append(r.all, p)
	r.mu.Unlock()
	return p, nil
}

// waitReady polls /readyz until 200, the process exits, or timeout.
func (p *relay) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	last := "no answer"
	for {
		if p.exited() {
			return fmt.Errorf("hookrelay %s exited before ready (%v): %s", p.id, p.waitErr, lastLines(p.logPath, 3))
		}
		resp, err := client.Get("http://" + p.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hookrelay %s not ready after %v (last: %s): %s", p.id, timeout, last, lastLines(p.logPath, 3))
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}

// start launches instance id and waits until it is ready; any failure
// fails the test.
func (r *rig) start(id string) *relay {
	r.t.Helper()
	p, err := r.launch(id)
	if err == nil {
		err = p.waitReady(readyTimeout)
	}
	if err != nil {
		r.t.Fatalf("faults: %v", err)
	}
	return p
}

// supervised keeps instance id running as an outside supervisor
// (systemd Restart=always) would: every exit is counted and logged with the
// last log line, and the instance is started again after a second.
type supervised struct {
	r     *rig
	id    string
	mu    sync.Mutex
	cur   *relay
	exits []string // one per unexpected exit: the error and the last log line
	stopc chan struct{}
	done  chan struct{}
}

// supervise starts instance id (waiting until ready) and keeps it running
// until the test ends or stop is called.
func (r *rig) supervise(id string) *supervised {
	r.t.Helper()
	s := &supervised{r: r, id: id, cur: r.start(id), stopc: make(chan struct{}), done: make(chan struct{})}
	go s.loop() // owner: s; stop (also a cleanup) waits for it
	r.t.Cleanup(s.stop)
	return s
}

func (s *supervised) loop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		p := s.cur
		s.mu.Unlock()
		select {
		case <-s.stopc:
			return
		case <-p.done:
		}
		s.mu.Lock()
		s.exits = append(s.exits, fmt.Sprintf("%s exited at %s (%v): %s", s.id, time.Now().Format("15:04:05.000"), p.waitErr, lastLines(p.logPath, 1)))
		s.mu.Unlock()
		select {
		case <-s.stopc:
			return
		case <-time.After(time.Second): // restart delay of the supervisor
		}
		np, err := s.r.launch(s.id)
		if err != nil {
			s.r.t.Errorf("faults: relaunch %s: %v", s.id, err)
			return
		}
		s.mu.Lock()
		s.cur = np
		s.mu.Unlock()
	}
}

// stop ends supervision and stops the current process; idempotent.
func (s *supervised) stop() {
	select {
	case <-s.stopc:
	default:
		close(s.stopc)
	}
	<-s.done
	s.mu.Lock()
	p := s.cur
	s.mu.Unlock()
	_ = p.stop()
}

// Exits returns the unexpected exits so far.
func (s *supervised) Exits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.exits...)
}

// waitReady waits until the current process of s answers /readyz 200.
func (s *supervised) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		p := s.cur
		s.mu.Unlock()
		err := p.waitReady(time.Until(deadline))
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond) // the supervisor restarts it
	}
}

// command returns an unstarted hookrelay command with the rig's
// environment (the parent's minus any HOOKRELAY_*).
func (r *rig) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, hookrelayBinary(r.t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKRELAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, r.env...)
	return cmd
}

// cli runs a short hookrelay command; a non-zero exit fails the test.
func (r *rig) cli(args ...string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := r.command(ctx, args...).CombinedOutput(); err != nil {
		r.t.Fatalf("hookrelay %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// freeAddr returns 127.0.0.1:<a port that was free a moment ago>.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lastLines returns the last n non-empty lines of a file, joined by " | ".
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// dumpGoroutines saves every running instance's goroutine stacks
// (/debug/pprof/goroutine?debug=2) and metrics next to its log, as
// <log>.goroutines-<n>.txt and <log>.metrics-<n>.txt, so that a stall can
// be read afterwards.
func (r *rig) dumpGoroutines() {
	r.mu.Lock()
	all := append([]*relay(nil), r.all...)
	r.mu.Unlock()
	client := &http.Client{Timeout: 10 * time.Second}
	for _, p := range all {
		if p.exited() {
			continue
		}
		p.dumps++
		resp, err := client.Get("http://" + p.httpAddr + "/debug/pprof/goroutine?debug=2")
		if err != nil {
			r.t.Logf("faults: goroutine dump of %s: %v", p.id, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		path := fmt.Sprintf("%s.goroutines-%d.txt", p.logPath, p.dumps)
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			r.t.Logf("faults: goroutine dump of %s: %v", p.id, err)
			continue
		}
		r.t.Logf("faults: goroutines of %s saved in %s", p.id, path)
		if resp, err := client.Get("http://" + p.httpAddr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = os.WriteFile(fmt.Sprintf("%s.metrics-%d.txt", p.logPath, p.dumps), b, 0o644)
		}
	}
}
