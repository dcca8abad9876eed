package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hookrelay/hookrelay/cmd/internal/childproc"
)

// newSecret returns a Standard Webhooks secret: "whsec_" and the standard
// base64 of 32 random bytes.
func newSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand documents it)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// receiver is one e2e/receiver/receiver.js process.
type receiver struct {
	*childproc.Proc
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
	p, err := childproc.Start("receiver "+behaviour, cmd, filepath.Join(runDir, "receiver-"+behaviour+".log"), pw)
	if err != nil {
		return nil, err
	}
	r.Proc = p
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
	go func() { <-p.Done(); pw.Close() }()
	select {
	case r.url = <-found:
		return r, nil
	case <-p.Done():
		return nil, fmt.Errorf("receiver %s exited before it was ready (%v): see %s", behaviour, p.Err(), p.Log)
	case <-time.After(15 * time.Second):
		p.Stop(5 * time.Second)
		return nil, fmt.Errorf("receiver %s printed no ready line within 15s: see %s", behaviour, p.Log)
	case <-ctx.Done():
		p.Stop(5 * time.Second)
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
