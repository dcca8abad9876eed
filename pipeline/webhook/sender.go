package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookrelay/hookrelay/audit"
)

// Sender defaults (seed "Webhook Delivery Throttling and Retries", delivery
// policy table: request_timeout 10 s, connect 3 s).
const (
	DefaultTimeout             = 10 * time.Second
	DefaultConnectTimeout      = 3 * time.Second
	DefaultTLSHandshakeTimeout = 10 * time.Second
	DefaultIdleConnTimeout     = 90 * time.Second
	DefaultMaxIdleConns        = 1024
	DefaultMaxIdleConnsPerHost = 8
	DefaultMaxDrainBytes       = 64 << 10
	DefaultVersion             = "dev"

	// maxResponseHeaderBytes bounds a hostile receiver's response headers.
	maxResponseHeaderBytes = 64 << 10

	// MaxHeaderValue bounds a response header value that Send keeps
	// (Result.Location), in bytes: 1 KiB, cut on a rune boundary.
	MaxHeaderValue = 1024
)

// ErrInvalidRequest is wrapped in Result.Err when Send refuses a Request
// before any network activity: a URL that does not parse, a scheme other than
// http or https, no host, a host that can never be dialled (a *HostError, see
// [ParseHost]), an empty WebhookID, or no non-zero secret. [Classify] maps it
// to [audit.Failed] with class [ClassInvalidRequest], or [ClassInvalidHost]
// for a *HostError. Its message never repeats the URL.
var ErrInvalidRequest = errors.New("webhook: invalid request")

// Options configures a Sender. The zero value is valid: every field is
// optional and has the default its doc names.
type Options struct {
	// Version is the hookrelay version sent in "user-agent: hookrelay/<Version>".
	// Optional. Default "dev". Must be an HTTP token (no spaces, no '/').
	Version string

	// AllowNetworks are prefixes the SSRF guard lets through even though they
	// are not global (e.g. 127.0.0.0/8 for tests and the demo, or an internal
	// receiver's network). cmd reads them from HOOKRELAY_ALLOW_NETWORKS with
	// [ParseAllowList]. Optional. Default none: every non-global address is
	// refused. IPv4-mapped prefixes are taken as their IPv4 form.
	AllowNetworks []netip.Prefix

	// Timeout bounds a whole request, from dialling to the end of the bounded
	// body read, when Request.Timeout is zero. Optional. Default 10s. Must not
	// be negative.
	Timeout time.Duration

	// ConnectTimeout bounds establishing the TCP connection (DNS resolution
	// and connect, all addresses tried) when Request.ConnectTimeout is zero.
	// Optional. Default 3s. Must not be negative.
	ConnectTimeout time.Duration

	// TLSHandshakeTimeout bounds a TLS handshake. It is per Sender, not per
	// request; the request Timeout bounds it as well. Optional. Default 10s.
	// Must not be negative.
	TLSHandshakeTimeout time.Duration

	// IdleConnTimeout is how long an idle keep-alive connection is kept.
	// Optional. Default 90s. Must not be negative.
	IdleConnTimeout time.Duration

	// MaxIdleConns bounds idle keep-alive connections over all hosts.
	// Optional. Default 1024. Must not be negative.
	MaxIdleConns int

	// MaxIdleConnsPerHost bounds idle keep-alive connections per host:port;
	// set it at least to the largest per-endpoint max_in_flight so paced
	// traffic reuses connections. Optional. Default 8. Must not be negative.
	MaxIdleConnsPerHost int

	// MaxDrainBytes is how much of a response body beyond the first
	// audit.MaxResponseBody bytes is read and discarded so the connection can
	// be reused; a longer body makes Send close the connection instead.
	// Optional. Default 64 KiB. Must not be negative.
	MaxDrainBytes int64

	// TLSConfig is the client TLS configuration (e.g. extra root CAs for
	// tests). Optional. Default: system roots. It is cloned; MinVersion is
	// raised to TLS 1.2 when lower.
	TLSConfig *tls.Config

	// Clock is the sender's wall clock: it stamps webhook-timestamp and
	// Result.SentAt and resolves Retry-After dates. Optional. Default
	// time.Now. Latency is measured with the monotonic clock regardless.
	Clock func() time.Time
}

// Sender posts signed webhook requests. It owns its http.Client and
// Transport (never http.DefaultClient, never an environment proxy, which
// would bypass the SSRF guard), pools keep-alive connections across
// endpoints, never follows redirects, and checks every address it dials
// against the SSRF guard after DNS resolution (net.Dialer.ControlContext), so
// a DNS answer that changes between validation and connect cannot slip
// through. Connections already open stay with the address they were opened to.
//
// A Sender is safe for concurrent use. Close releases idle connections.
type Sender struct {
	client         *http.Client
	transport      *http.Transport
	userAgent      string
	timeout        time.Duration
	connectTimeout time.Duration
	maxDrain       int64
	clock          func() time.Time
	guard          *guard
}

// connectTimeoutKey carries a request's connect timeout to the dialer. The
// transport dials with a context that keeps the request's values.
type connectTimeoutKey struct{}

// NewSender validates o and returns a Sender. Errors name the invalid field.
func NewSender(o Options) (*Sender, error) {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Sender{
		userAgent:      "hookrelay/" + o.Version,
		timeout:        orDefault(o.Timeout, DefaultTimeout),
		connectTimeout: orDefault(o.ConnectTimeout, DefaultConnectTimeout),
		maxDrain:       orDefault(o.MaxDrainBytes, DefaultMaxDrainBytes),
		clock:          o.Clock,
		guard:          &guard{allow: maskAll(o.AllowNetworks)},
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	s.transport = newTransport(o, s.guard, s.connectTimeout)
	s.client = &http.Client{
		Transport: s.transport,
		// Never follow: a 3xx is the result (seed gotcha "Following redirects";
		// spec "Delivery success and failure": 3xx is a failure).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// validate checks o with Version already defaulted; errors name the field.
func (o Options) validate() error {
	if !isToken(o.Version) {
		return fmt.Errorf("webhook: Options.Version %q is not an HTTP token", o.Version)
	}
	for name, d := range map[string]time.Duration{
		"Timeout": o.Timeout, "ConnectTimeout": o.ConnectTimeout,
		"TLSHandshakeTimeout": o.TLSHandshakeTimeout, "IdleConnTimeout": o.IdleConnTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("webhook: Options.%s must not be negative, got %s", name, d)
		}
	}
	for name, n := range map[string]int64{
		"MaxIdleConns": int64(o.MaxIdleConns), "MaxIdleConnsPerHost": int64(o.MaxIdleConnsPerHost),
		"MaxDrainBytes": o.MaxDrainBytes,
	} {
		if n < 0 {
			return fmt.Errorf("webhook: Options.%s must not be negative, got %d", name, n)
		}
	}
	for i, p := range o.AllowNetworks {
		if !p.IsValid() {
			return fmt.Errorf("webhook: Options.AllowNetworks[%d] is not a valid prefix", i)
		}
	}
	return nil
}

// orDefault is v, or def when v is zero (an unset Options field).
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// newTransport builds the Sender's transport from o (validated): no proxy,
// every dialled address checked by g after DNS resolution, a connect
// timeout per request (connectTimeoutKey, else defaultConnect), TLS 1.2 at
// least, no decompression, bounded response headers.
func newTransport(o Options, g *guard, defaultConnect time.Duration) *http.Transport {
	var tlsConfig *tls.Config
	if o.TLSConfig != nil {
		tlsConfig = o.TLSConfig.Clone()
	} else {
		tlsConfig = &tls.Config{}
	}
	if tlsConfig.MinVersion < tls.VersionTLS12 {
		tlsConfig.MinVersion = tls.VersionTLS12
	}
	dialer := &net.Dialer{
		KeepAlive: 30 * time.Second,
		ControlContext: func(_ context.Context, network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &BlockedError{Reason: "unparseable address " + strconv.Quote(address)}
			}
			return g.check(ap.Addr())
		},
	}
	return &http.Transport{
		Proxy: nil, // an environment proxy would be dialled instead of the endpoint, bypassing the guard
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := defaultConnect
			if v, ok := ctx.Value(connectTimeoutKey{}).(time.Duration); ok && v > 0 {
				d = v
			}
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return dialer.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        tlsConfig,
		TLSHandshakeTimeout:    orDefault(o.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout),
		IdleConnTimeout:        orDefault(o.IdleConnTimeout, DefaultIdleConnTimeout),
		MaxIdleConns:           orDefault(o.MaxIdleConns, DefaultMaxIdleConns),
		MaxIdleConnsPerHost:    orDefault(o.MaxIdleConnsPerHost, DefaultMaxIdleConnsPerHost),
		DisableCompression:     true, // keep the logged body as sent; no decompression work for hostile bodies
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
}

// Close closes the Sender's idle connections. Requests in flight are not
// interrupted; a Send after Close works and opens new connections.
func (s *Sender) Close() { s.transport.CloseIdleConnections() }

// Request is one webhook attempt to send.
type Request struct {
	// URL is the endpoint URL. Required; http or https with a host.
	URL string
	// Body is sent byte for byte and signed as is (see [Body]).
	Body []byte
	// WebhookID is the webhook-id header (see [WebhookID]). Required.
	WebhookID string
	// Secrets sign the request, one webhook-signature entry each (see [Sign]);
	// pass only unexpired ones. At least one non-zero secret is required.
	Secrets []Secret
	// Header holds extra request headers, e.g. traceparent and tracestate.
	// Optional. Send sets content-type, user-agent and the three webhook-*
	// headers after copying these, so they cannot be overridden here.
	Header http.Header
	// Timeout bounds the whole request (the endpoint's request timeout).
	// Optional. Zero means the Sender's Options.Timeout (default 10s).
	Timeout time.Duration
	// ConnectTimeout bounds DNS resolution and TCP connect (the endpoint's
	// connect timeout). Optional. Zero means Options.ConnectTimeout (default 3s).
	ConnectTimeout time.Duration
}

// Result is what one Send observed. A non-2xx status is a result, not an
// error: Err is set only when no response status was received. Pass the
// Result to [Classify] for the outcome.
type Result struct {
	// SentAt is when the attempt started, by the Sender's clock; the
	// request's webhook-timestamp is SentAt.Unix().
	SentAt time.Time
	// Latency is from the start of the request to the response headers, or
	// to the error.
	Latency time.Duration
	// StatusCode is the response status, 0 when Err is set.
	StatusCode int
	// Body holds the first audit.MaxResponseBody (4 KiB) bytes of the
	// response body; the rest is discarded.
	Body []byte
	// Location is the Location header of a 3xx answer (not followed),
	// redacted ([RedactURL]: no userinfo, query or fragment) and cut to
	// MaxHeaderValue (1 KiB) bytes. No other response header is kept.
	Location string
	// RequestHeader is the request's header as sent, without
	// webhook-signature (nil when no request was built). Header is the
	// response's header (nil without a response); Go bounds it to 64 KiB.
	// Both are for the delivery log, which redacts and cuts them.
	RequestHeader, Header map[string][]string
	// RetryAfter is the response's Retry-After (either form, parsed by
	// ParseRetryAfter), resolved against the Sender's clock when
	// the response arrived; a past date is 0. It is not capped. Meaningful
	// only when HasRetryAfter; a malformed header leaves HasRetryAfter false.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Err is why no response status was received: a *BlockedError (SSRF
	// guard: at dial time, or before any lookup for an IP literal in any
	// spelling), a wrapped ErrInvalidRequest (possibly wrapping a
	// *HostError), or the client's *url.Error (timeouts, DNS, connect, TLS,
	// reset), wrapped so errors.As and errors.Is see the cause. The
	// *url.Error's URL is redacted ([RedactURL]), so Err.Error() can be
	// logged.
	Err error
	// BodyErr is an error reading the response body after the status
	// arrived (e.g. the request timeout hit mid-body). It is informational:
	// the status stands, and Classify ignores it.
	BodyErr error
}

// Send makes one POST attempt and returns what happened; it never panics and
// always returns a Result. It stamps webhook-timestamp with the Sender's
// clock, signs r.Body with r.Secrets, and sets content-type
// application/json and user-agent hookrelay/<version>. It returns when the
// response body has been read (at most 4 KiB kept, at most MaxDrainBytes more
// discarded) and closed, or when ctx, the request timeout or the connect
// timeout ends the attempt.
func (s *Sender) Send(ctx context.Context, r *Request) Result {
	now := s.clock()
	res := Result{SentAt: now}
	if err := s.validateRequest(r); err != nil {
		res.Err = err
		return res
	}
	timeout, connect := r.Timeout, r.ConnectTimeout
	if timeout <= 0 {
		timeout = s.timeout
	}
	if connect <= 0 {
		connect = s.connectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = context.WithValue(ctx, connectTimeoutKey{}, connect)

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		res.Err = fmt.Errorf("%w: %v", ErrInvalidRequest, RedactText(err.Error()))
		return res
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	req.Header.Set(HeaderWebhookID, r.WebhookID)
	req.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	res.RequestHeader = req.Header.Clone()
	req.Header.Set(HeaderWebhookSignature, Sign(r.WebhookID, now, r.Body, r.Secrets...))

	start := time.Now()
	resp, err := s.client.Do(req)
	res.Latency = time.Since(start)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			urlErr.URL = RedactURL(urlErr.URL) // the error is ours; its text reaches the log
		}
		res.Err = err
		return res
	}
	res.StatusCode = resp.StatusCode
	res.Header = resp.Header
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		res.Location = boundText(RedactURL(boundText(resp.Header.Get("Location"), 4*MaxHeaderValue)), MaxHeaderValue)
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		res.RetryAfter, res.HasRetryAfter = ParseRetryAfter(v, s.clock())
	}
	res.Body, res.BodyErr = s.readBody(resp)
	return res
}

// readBody keeps the first audit.MaxResponseBody bytes, discards at most
// maxDrain more so the connection can go back to the pool, and closes.
func (s *Sender) readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	size := int64(audit.MaxResponseBody)
	if resp.ContentLength >= 0 && resp.ContentLength < size {
		size = resp.ContentLength
	}
	buf := make([]byte, size)
	n, err := io.ReadFull(resp.Body, buf)
	buf = buf[:n]
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil // shorter than 4 KiB (or than a lying Content-Length): fine
	}
	if err != nil {
		return buf, err
	}
	if _, err := io.CopyN(io.Discard, resp.Body, s.maxDrain); err != nil && !errors.Is(err, io.EOF) {
		return buf, err
	}
	return buf, nil
}

// validateRequest refuses r before any network activity. An IP literal host
// in any spelling is judged by the SSRF guard here ([CheckHost]), so a
// spelling Go's resolver would look up as a name is blocked (or failed), not
// retried as a DNS error.
func (s *Sender) validateRequest(r *Request) error {
	if r == nil {
		return fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // the *url.Error repeats the whole URL
		}
		return fmt.Errorf("%w: URL does not parse: %v", ErrInvalidRequest, RedactText(err.Error()))
	}
	if scheme := strings.ToLower(u.Scheme); scheme != "http" && scheme != "https" {
		return fmt.Errorf("%w: URL scheme %q is not http or https", ErrInvalidRequest, boundText(u.Scheme, 32))
	}
	if u.Host == "" {
		return fmt.Errorf("%w: URL has no host", ErrInvalidRequest)
	}
	if err := s.guard.checkHost(u.Hostname()); err != nil {
		var blocked *BlockedError
		if errors.As(err, &blocked) {
			return blocked
		}
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if r.WebhookID == "" {
		return fmt.Errorf("%w: empty webhook-id", ErrInvalidRequest)
	}
	for _, sec := range r.Secrets {
		if !sec.IsZero() {
			return nil
		}
	}
	return fmt.Errorf("%w: no signing secret", ErrInvalidRequest)
}

// isToken reports whether s is a non-empty HTTP token (RFC 9110 §5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
