// Package childproc runs hookrelay (and other helpers) as child processes
// for the demo and the benchmark harness: start with the output in a log
// file, stop with SIGTERM then SIGKILL, and wait for /readyz.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Proc is a child process its starter owns: Stop signals it and waits.
// Safe for concurrent use.
type Proc struct {
	Name string // for messages
	Log  string // file receiving its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	err  error         // its exit status, valid once done is closed
}

// Start runs cmd with stdout and stderr appended to logPath (and, when tee
// is set, also streamed to tee), in its own process group, with the
// starter's death signalled to it (Pdeathsig), so an interrupted run leaves
// no child behind.
func Start(name string, cmd *exec.Cmd, logPath string, tee io.Writer) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var out io.Writer = f
	if tee != nil {
		out = io.MultiWriter(f, tee)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, cmd.Path, err)
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits up to grace for the exit, then SIGKILLs. It
// returns the exit error: nil for a clean exit or one caused by our SIGTERM.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM {
			return nil
		}
		return p.err
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM: killed", p.Name, grace)
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the exit status once Exited; nil before.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Tail returns the last n lines of a file, indented by four spaces.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

var opsClient = &http.Client{Timeout: 5 * time.Second}

// WaitReady polls http://addr/readyz every 100ms until it answers 200. It
// fails, with the tail of p's log, when p exits first or timeout passes.
func WaitReady(ctx context.Context, p *Proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited before /readyz answered 200 (%v); last lines of %s:\n%s", p.Name, p.err, p.Log, Tail(p.Log, 20))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		res, err := opsClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s %s", res.Status, strings.TrimSpace(string(b)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s /readyz not 200 within %s (last: %s); last lines of %s:\n%s", p.Name, timeout, last, p.Log, Tail(p.Log, 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
