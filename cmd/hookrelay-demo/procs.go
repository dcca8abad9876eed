package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// newSecret returns a Standard Webhooks secret: "whsec_" and the standard
// base64 of 32 random bytes.
func newSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand documents it)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// proc is a child process the demo owns: stop signals it and waits.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string        // file receiving its stdout and stderr
	done chan struct{} // closed when it has exited
	err  error         // its exit status, valid once done is closed
}

// start runs cmd with stdout and stderr appended to logPath (and, when tee
// is set, also streamed to tee), in its own process group, with the demo's
// death signalled to it (Pdeathsig), so an interrupted demo leaves no child
// behind.
func start(name string, cmd *exec.Cmd, logPath string, tee io.Writer) (*proc, error) {
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
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM and waits up to grace for the exit, then SIGKILLs. It
// returns the exit error, nil for a clean exit or one caused by our SIGTERM.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM {
			return nil
		}
		return p.err
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM: killed", p.name, grace)
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// receiver is one e2e/receiver/receiver.js process.
type receiver struct {
	*proc
	behaviour string
	secret    string
	url       string // http://127.0.0.1:PORT
	requests  string // its per-request JSON lines log
}

var readyLine = regexp.MustCompile(`hookrelay-receiver ready url=(\S+)`)

// startReceiver starts receiver.js with behaviour (extra flags appended),
// on a free port, and waits up to 15 s for its ready line.
func startReceiver(ctx context.Context, node, dir, runDir, behaviour string, extra ...string) (*receiver, error) {
	r := &receiver{behaviour: behaviour, secret: newSecret(), requests: filepath.Join(runDir, "receiver-"+behaviour+".requests.jsonl")}
	args := append([]string{filepath.Join(dir, "receiver.js"), "--behaviour", behaviour, "--name", behaviour, "--port", "0", "--log", r.requests}, extra...)
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RECEIVER_SECRET="+r.secret) // not in argv: ps shows argv
	pr, pw := io.Pipe()
	p, err := start("receiver "+behaviour, cmd, filepath.Join(runDir, "receiver-"+behaviour+".log"), pw)
	if err != nil {
		return nil, err
	}
	r.proc = p
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, pr) // a line too long for the scanner: keep draining
	}()
	go func() { <-p.done; pw.Close() }()
	select {
	case r.url = <-found:
		return r, nil
	case <-p.done:
		return nil, fmt.Errorf("receiver %s exited before it was ready (%v): see %s", behaviour, p.err, p.log)
	case <-time.After(15 * time.Second):
		p.stop(5 * time.Second)
		return nil, fmt.Errorf("receiver %s printed no ready line within 15s: see %s", behaviour, p.log)
	case <-ctx.Done():
		p.stop(5 * time.Second)
		return nil, ctx.Err()
	}
}

// receiverStats is what receiver.js serves on GET /stats.
type receiverStats struct {
	Name         string         `json:"name"`
	Behaviour    string         `json:"behaviour"`
	Requests     int            `json:"requests"`
	Verified     int            `json:"verified"`
	Failed       int            `json:"failed"`
	Statuses     map[string]int `json:"statuses"`
	InFlight     int            `json:"in_flight"`
	PeakInFlight int            `json:"peak_in_flight"`
	Aborted      int            `json:"aborted"`
	WebhookIDs   int            `json:"webhook_ids"`
	Duplicates   int            `json:"duplicates"`
	Failures     []struct {
		WebhookID string `json:"webhook_id"`
		Error     string `json:"error"`
	} `json:"failures"`
}

func (r *receiver) stats(ctx context.Context) (receiverStats, error) {
	var s receiverStats
	err := getJSON(ctx, r.url+"/stats", &s)
	return s, err
}

func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return json.NewDecoder(io.LimitReader(res.Body, 16<<20)).Decode(v)
}

// freeAddr returns a loopback address with a port that was free a moment
// ago (for hookrelay's --http-addr, which has no "pick one" mode).
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitReady polls http://addr/readyz until it answers 200, p exits, or
// timeout passes; the errors name p's log.
func waitReady(ctx context.Context, p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if p.exited() {
			return fmt.Errorf("hookrelay run exited before /readyz answered 200 (%v); last lines of %s:\n%s", p.err, p.log, tail(p.log, 20))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		res, err := http.DefaultClient.Do(req)
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
			return fmt.Errorf("hookrelay /readyz not 200 within %s (last: %s); last lines of %s:\n%s", timeout, last, p.log, tail(p.log, 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of the file at path, indented.
func tail(path string, n int) string {
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
