package endpoints

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// Defaults applied by [Endpoint.SetDefaults] to zero fields (seed "Webhook
// Delivery Throttling and Retries", delivery policy table; delivery-path
// issue, "Endpoints and subscriptions").
const (
	DefaultRatePerSec     = 10.0             // requests per second
	DefaultMaxInFlight    = 4                // concurrent requests
	DefaultTimeout        = 10 * time.Second // whole request, response headers included
	DefaultConnectTimeout = 3 * time.Second  // TCP (and TLS) connect
)

// Limits checked by [Endpoint.Validate].
const (
	MaxIDLen          = 128
	MaxTenantLen      = 128
	MaxURLLen         = 2048
	MaxSecrets        = 10
	MaxEventTypes     = 64
	MaxEventTypeLen   = 256
	MaxRatePerSec     = 10000.0
	MaxMaxInFlight    = 1000
	MaxTimeout        = 60 * time.Second
	MaxReasonLen      = 64
	MaxStatusDetail   = 1024
	SecretPrefix      = "whsec_"
	WildcardAll       = "*"
	wildcardSuffix    = "*"
	maskedSecretChars = 4
)

// State is an endpoint's status: active or disabled (the operator's and the
// pipeline's switch), or, as an effective status only, invalid.
type State string

// The states of an endpoint.
const (
	Active   State = "active"
	Disabled State = "disabled"
	// Invalid is never stored: it is the effective status of a record the
	// View could not use (see Endpoint.ConfigError). Nothing is sent to it.
	Invalid State = "invalid"
)

// Valid reports whether s is Active or Disabled.
func (s State) Valid() bool { return s == Active || s == Disabled }

// Reasons the pipeline or the operator disables an endpoint with. Reason
// fields are free-form short codes; these are the ones hookrelay writes.
const (
	ReasonGone     = "gone"     // the endpoint answered 410 (delivery-path issue)
	ReasonFailing  = "failing"  // failing for HOOKRELAY_DISABLE_AFTER without a success (endpoint health)
	ReasonOperator = "operator" // disabled in the config without a reason
)

// Secret is one Standard Webhooks signing secret of an endpoint. An endpoint
// has one or more, so a secret can be rotated with an overlap: add the new
// one, give the old one an ExpiresAt, and every request is signed with each
// unexpired secret until then (seed "Reliable Webhook Delivery", gotchas:
// "rotate signing secrets with an overlap period").
type Secret struct {
	// Value is "whsec_" followed by the standard base64 (with padding) of a
	// 24 to 64 byte key.
	Value string `json:"value"`
	// ExpiresAt, when set, is the instant from which the secret no longer
	// signs. Optional.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Active reports whether the secret still signs at now.
func (s Secret) Active(now time.Time) bool { return s.ExpiresAt == nil || now.Before(*s.ExpiresAt) }

// Endpoint is one webhook endpoint: its configuration as stored in the
// compacted endpoints topic (the JSON value of the record keyed by ID; see
// the package documentation for the format), plus Version and
// PipelineStatus, which a [View] fills in and which are not stored.
//
// An *Endpoint obtained from a View is shared and immutable: do not modify
// it; [Endpoint.Clone] it first.
type Endpoint struct {
	// ID identifies the endpoint and is the record key: 1 to 128 of
	// A-Z a-z 0-9 . _ -. Required.
	ID string
	// URL receives the webhook requests: http or https, a host the sender
	// can dial (an IP literal only in canonical form: "127.0.0.1", "[::1]"),
	// no user information, no fragment, at most 2048 bytes. Required. Its
	// query is kept and sent, but never logged (webhook.RedactURL).
	URL string
	// Secrets sign every request: 1 to 10, each unexpired one signs.
	// Required.
	Secrets []Secret
	// EventTypes selects the events by their CloudEvents type: exact types
	// ("invoice.paid"), prefix wildcards ending in "*" ("invoice.*" matches
	// "invoice.paid" and "invoice.paid.v2" but not "invoice"), or "*" for
	// every type. 1 to 64 patterns of at most 256 bytes, no spaces or
	// control characters, "*" only at the end. Required: an endpoint with no
	// patterns matches nothing, and Validate refuses it.
	EventTypes []string
	// TenantID, when set, restricts the endpoint to events whose tenantid
	// extension equals it; an endpoint without one receives only events
	// without a tenant. At most 128 bytes, no spaces or control characters.
	// Optional.
	TenantID string
	// RatePerSec paces requests to the endpoint, in requests per second.
	// Optional. Default 10; at most 10000.
	RatePerSec float64
	// MaxInFlight caps concurrent requests to the endpoint. Optional.
	// Default 4; 1 to 1000.
	MaxInFlight int
	// Timeout bounds one request, from dialling to the end of the response
	// headers. Optional. Default 10s; at most 60s.
	Timeout time.Duration
	// ConnectTimeout bounds the TCP and TLS connect. Optional. Default 3s;
	// at most Timeout.
	ConnectTimeout time.Duration
	// Status is the operator's switch. Optional. Default Active. The
	// pipeline never writes it: see PipelineStatus and the effective status
	// rule in the package documentation.
	Status State
	// DisabledReason says why the operator disabled the endpoint (e.g.
	// "customer request"). Optional; at most 64 bytes.
	DisabledReason string
	// CreatedAt and UpdatedAt are set by [Store.Put].
	CreatedAt time.Time
	UpdatedAt time.Time
	// Incarnation identifies this endpoint as opposed to an earlier or later
	// one with the same ID: 32 hex characters set when the endpoint is
	// created ([Store.Create], or [Store.Put] of an ID that does not exist)
	// and kept by every update, so deleting and re-creating an ID makes a
	// new endpoint. Every delivery carries the incarnation it was fanned out
	// for and is sent only while the endpoint still has it (see
	// [Endpoint.Mismatch]). Records written by another producer may lack it
	// (""): their identity is then unknown, and only the tenant and
	// subscription checks apply.
	Incarnation string

	// ConfigError is set by the View when the record cannot be used (bad
	// JSON, an ID that differs from the key, or a [Endpoint.Validate]
	// error: [*FieldError]s joined). Such an endpoint is kept so it is
	// visible (EffectiveStatus Invalid, with the reason), its fields hold
	// what could be read, and nothing is ever sent to it. Not stored.
	ConfigError error

	// Version identifies this config write: the offset of its record in its
	// endpoints-topic partition plus one (so 0 means "not from the topic").
	// Set by the View; not stored. [Store.Put] with a non-zero Version
	// writes only if the endpoint is still at that version.
	Version int64
	// PipelineStatus is the pipeline's own status record for the endpoint
	// (endpoint-status topic), or nil. Set by the View; not stored.
	PipelineStatus *Status
}

// Status is a record of the compacted endpoint-status topic, keyed by
// endpoint ID: the pipeline's verdict on an endpoint (e.g. 410 → disabled,
// reason "gone"), kept apart from the operator's config so that neither
// overwrites the other.
type Status struct {
	// State is Disabled when the pipeline stopped the endpoint. Required.
	State State `json:"state"`
	// Reason is a short code, e.g. ReasonGone, ReasonFailing. At most 64
	// bytes.
	Reason string `json:"reason,omitempty"`
	// Detail is for people, e.g. "410 Gone from hooks.example.com". At most
	// 1024 bytes.
	Detail string `json:"detail,omitempty"`
	// At is when the pipeline decided (e.g. the attempt that got the 410).
	// Required.
	At time.Time `json:"at"`
	// ConfigVersion is the Endpoint.Version the pipeline acted on. A
	// disabled status applies to that config version and earlier ones only:
	// any later operator write of the endpoint supersedes it. Required for
	// State Disabled.
	ConfigVersion int64 `json:"config_version,omitempty"`
	// FailingSince is the time of the endpoint's first failed attempt
	// without a success since (the failing-since clock of endpoint health,
	// pipeline/health.go): set on a record with State Active while the
	// endpoint is failing, and on the Disabled record that ends it (reason
	// "failing"). Nil when healthy. A Disabled record superseded by a later
	// config write (an enable) no longer applies, and neither does its
	// FailingSince. Optional.
	FailingSince *time.Time `json:"failing_since,omitempty"`
}

// Validate checks s, naming the field in its error.
func (s *Status) Validate() error {
	var errs []error
	if !s.State.Valid() {
		errs = append(errs, fieldErr("state", "must be %q or %q, got %q", Active, Disabled, bounded(string(s.State))))
	}
	if len(s.Reason) > MaxReasonLen {
		errs = append(errs, fieldErr("reason", "longer than %d bytes", MaxReasonLen))
	}
	if len(s.Detail) > MaxStatusDetail {
		errs = append(errs, fieldErr("detail", "longer than %d bytes", MaxStatusDetail))
	}
	if s.At.IsZero() {
		errs = append(errs, fieldErr("at", "required"))
	}
	if s.State == Disabled && s.ConfigVersion <= 0 {
		errs = append(errs, fieldErr("config_version", "required (> 0) for state disabled"))
	}
	return errors.Join(errs...)
}

// FieldError is one problem with one field of an Endpoint or a Status: the
// error [Endpoint.Validate], [Endpoint.ValidateAddress], [Status.Validate]
// and [Store.Put] return, one per problem, joined (errors.Join). errors.As
// finds the first; [FieldErrors] lists them all, e.g. to mark an endpoint
// record invalid in a view or to answer an API request with every field
// named. Its text never repeats a secret, nor a URL's userinfo or query.
type FieldError struct {
	// Field is the JSON name of the field in the endpoint record, with an
	// index for list members: "url", "secrets[1].value", "event_types[0]".
	Field string
	// Reason says what is wrong and what is accepted, for people, e.g.
	// "must not contain credentials (user information)".
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// FieldErrors returns every *FieldError in err, in order, looking through
// errors.Join and %w wrapping; nil when there is none.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		switch x := err.(type) {
		case nil:
		case *FieldError:
			out = append(out, x)
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return out
}

// SetDefaults fills the zero optional fields with their defaults: RatePerSec,
// MaxInFlight, Timeout, ConnectTimeout and Status.
func (e *Endpoint) SetDefaults() {
	if e.RatePerSec == 0 {
		e.RatePerSec = DefaultRatePerSec
	}
	if e.MaxInFlight == 0 {
		e.MaxInFlight = DefaultMaxInFlight
	}
	if e.Timeout == 0 {
		e.Timeout = DefaultTimeout
	}
	if e.ConnectTimeout == 0 {
		e.ConnectTimeout = min(DefaultConnectTimeout, e.Timeout)
	}
	if e.Status == "" {
		e.Status = Active
	}
}

// Validate checks every field (after SetDefaults, zero optional fields are
// errors) and returns every problem found, each a [*FieldError] naming the
// field, joined; nil means the endpoint can be used. It is the one test of
// whether an endpoint record is usable, wherever it came from (the CLI, the
// view reading records of other producers, the REST API). The rules are on
// the Endpoint fields; in short:
//
//   - url: http or https, a host, no userinfo, no fragment, at most 2048
//     bytes, no spaces; a host the sender can never dial is refused: an IP
//     literal in a non-canonical spelling ("2130706433", "0x7f.1", "127.1",
//     "0177.0.0.1", "127.0.0.1.") or a host that ends in a number but is no
//     address ("1.2.3.4.5"), see webhook.ParseHost.
//   - secrets: 1 to 10, each Standard Webhooks form: "whsec_" + standard
//     base64 with padding of a 24 to 64 byte key (spec "Signature scheme":
//     at least 192 bits, at most 512), no duplicates.
//   - event_types, tenantid, rate_per_sec, max_in_flight, timeout,
//     connect_timeout, status, disabled_reason: as documented on the fields.
//
// It does not look at the clock (whether a secret is still unexpired is
// checked by [Store.Put]) nor at the SSRF allow-list, which is the
// process's configuration: see [Endpoint.ValidateAddress].
func (e *Endpoint) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) { errs = append(errs, fieldErr(field, format, args...)) }

	if err := ValidateID(e.ID); err != nil {
		add("id", "%s", err.Error())
	}
	if err := validateURL(e.URL); err != nil {
		add("url", "%s", err.Error())
	}

	switch {
	case len(e.Secrets) == 0:
		add("secrets", "at least one whsec_ secret is required")
	case len(e.Secrets) > MaxSecrets:
		add("secrets", "%d secrets, at most %d", len(e.Secrets), MaxSecrets)
	}
	for i, s := range e.Secrets {
		if err := ParseSecret(s.Value); err != nil {
			add(fmt.Sprintf("secrets[%d].value", i), "%s", err.Error())
		}
		if slices.ContainsFunc(e.Secrets[:i], func(o Secret) bool { return o.Value == s.Value }) {
			add(fmt.Sprintf("secrets[%d].value", i), "duplicate secret")
		}
	}

	switch {
	case len(e.EventTypes) == 0:
		add("event_types", `at least one pattern is required ("*" for every type)`)
	case len(e.EventTypes) > MaxEventTypes:
		add("event_types", "%d patterns, at most %d", len(e.EventTypes), MaxEventTypes)
	}
	for i, p := range e.EventTypes {
		if err := ValidatePattern(p); err != nil {
			add(fmt.Sprintf("event_types[%d]", i), "%s", err.Error())
		}
	}

	if len(e.TenantID) > MaxTenantLen {
		add("tenantid", "longer than %d bytes", MaxTenantLen)
	} else if !printable(e.TenantID) {
		add("tenantid", "must be UTF-8 without spaces or control characters")
	}

	if math.IsNaN(e.RatePerSec) || e.RatePerSec <= 0 || e.RatePerSec > MaxRatePerSec {
		add("rate_per_sec", "must be > 0 and <= %g requests per second, got %g", MaxRatePerSec, e.RatePerSec)
	}
	if e.MaxInFlight < 1 || e.MaxInFlight > MaxMaxInFlight {
		add("max_in_flight", "must be 1 to %d, got %d", MaxMaxInFlight, e.MaxInFlight)
	}
	if e.Timeout <= 0 || e.Timeout > MaxTimeout {
		add("timeout", "must be > 0 and <= %s, got %s", MaxTimeout, e.Timeout)
	}
	switch {
	case e.ConnectTimeout <= 0:
		add("connect_timeout", "must be > 0, got %s", e.ConnectTimeout)
	case e.ConnectTimeout > e.Timeout && e.Timeout > 0:
		add("connect_timeout", "%s is longer than timeout %s", e.ConnectTimeout, e.Timeout)
	}

	if !e.Status.Valid() {
		add("status", "must be %q or %q, got %q", Active, Disabled, bounded(string(e.Status)))
	}
	if len(e.DisabledReason) > MaxReasonLen {
		add("disabled_reason", "longer than %d bytes", MaxReasonLen)
	}
	return errors.Join(errs...)
}

// ValidateID checks an endpoint ID: 1 to 128 of A-Z a-z 0-9 . _ -.
func ValidateID(id string) error {
	if id == "" {
		return errors.New("required")
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("longer than %d bytes", MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("character %q not allowed (only A-Z a-z 0-9 . _ -)", c)
		}
	}
	return nil
}

func validateURL(s string) error {
	if s == "" {
		return errors.New("required")
	}
	if len(s) > MaxURLLen {
		return fmt.Errorf("longer than %d bytes", MaxURLLen)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return errors.New("contains spaces or control characters")
	}
	u, err := url.Parse(s)
	if err != nil {
		if webhook.RedactURL(s) != s {
			// The parser's detail may quote the userinfo or query.
			return errors.New("not a URL")
		}
		return fmt.Errorf("not a URL: %v", errors.Unwrap(err))
	}
	if scheme := strings.ToLower(u.Scheme); scheme != "http" && scheme != "https" {
		return fmt.Errorf("scheme %q not allowed (only http and https)", bounded(u.Scheme))
	}
	if u.User != nil {
		return errors.New("must not contain credentials (user information)")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return errors.New("must have a host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q out of range", bounded(port))
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return errors.New("empty port")
	}
	if u.Fragment != "" {
		return errors.New("must not have a fragment")
	}
	if _, err := webhook.ParseHost(u.Hostname()); err != nil {
		var he *webhook.HostError
		if errors.As(err, &he) {
			msg := fmt.Sprintf("host %q can never be dialled: %s", he.Host, he.Reason)
			if he.Addr.IsValid() {
				if blocked, reason := webhook.IsBlocked(he.Addr, nil); blocked {
					msg += fmt.Sprintf(" (%s is a %s address, which the SSRF guard refuses unless allowed)", he.Addr, reason)
				}
			}
			return errors.New(msg)
		}
		return err
	}
	return nil
}

// ValidateAddress refuses a URL whose host is an IP literal, in any spelling
// ([webhook.CheckHost]: "127.0.0.1", "[::ffff:127.0.0.1]", "2130706433",
// "[64:ff9b::7f00:1]", "[fe80::1%25eth0]" …), inside a range the SSRF guard
// refuses (loopback, private, link-local, …) and allow does not allow, with a
// *FieldError for "url" that names the address and the range; allow is the
// process's HOOKRELAY_ALLOW_NETWORKS. Host names are not resolved here:
// their addresses are checked when dialled. [Store.Put] applies it to new
// endpoints and changed URLs; an endpoint that passes Validate but not this
// check is delivered as outcome blocked.
func (e *Endpoint) ValidateAddress(allow []netip.Prefix) error {
	u, err := url.Parse(e.URL)
	if err != nil {
		return nil // Validate reports it
	}
	var be *webhook.BlockedError
	if err := webhook.CheckHost(u.Hostname(), allow); errors.As(err, &be) {
		return fieldErr("url", "host %s is a %s address, which the SSRF guard refuses (not in the allow-list, HOOKRELAY_ALLOW_NETWORKS)", be.Addr, be.Reason)
	}
	return nil
}

// ValidatePattern checks an event-type pattern: "*", an exact type, or a
// prefix followed by a final "*"; at most 256 bytes, UTF-8 without spaces or
// control characters.
func ValidatePattern(p string) error {
	switch {
	case p == "":
		return errors.New("empty pattern")
	case len(p) > MaxEventTypeLen:
		return fmt.Errorf("longer than %d bytes", MaxEventTypeLen)
	case !printable(p):
		return fmt.Errorf("pattern %q: must be UTF-8 without spaces or control characters", p)
	case p == WildcardAll:
		return nil
	}
	if i := strings.IndexByte(p, '*'); i >= 0 && i != len(p)-1 {
		return fmt.Errorf("pattern %q: %q is only allowed as the last character", p, wildcardSuffix)
	}
	return nil
}

// maxValueInError bounds a field value repeated in a FieldError's Reason, so
// a hostile record cannot make a log line or an API answer large.
const maxValueInError = 64

// bounded cuts s to maxValueInError bytes (on a rune boundary) plus "…".
func bounded(s string) string {
	if len(s) <= maxValueInError {
		return s
	}
	cut := maxValueInError
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

// MatchesType reports whether one of patterns selects eventType (see
// Endpoint.EventTypes). No patterns match nothing.
func MatchesType(patterns []string, eventType string) bool {
	for _, p := range patterns {
		if p == WildcardAll || p == eventType {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, wildcardSuffix); ok && len(eventType) > len(prefix) && strings.HasPrefix(eventType, prefix) {
			return true
		}
	}
	return false
}

// Matches reports whether the endpoint's filter selects an event of
// eventType and tenant (the event's tenantid extension, "" for none): the
// tenants must be equal (so an event without a tenant goes only to
// endpoints without one) and one of EventTypes must match. It ignores the
// status; [View.Match] returns only active endpoints.
func (e *Endpoint) Matches(eventType, tenant string) bool {
	return e.TenantID == tenant && MatchesType(e.EventTypes, eventType)
}

// EffectiveStatus returns the status that governs delivery, and its reason:
//
//   - Invalid with the problems (field: why) when ConfigError is set;
//   - Disabled with DisabledReason (or "operator") when the operator's
//     Status is Disabled;
//   - Disabled with the pipeline's reason when PipelineStatus is Disabled and
//     its ConfigVersion is at least Version, i.e. the pipeline decided on
//     this very config write (or a later one) — so an operator write after
//     the pipeline's verdict (a re-enable, a URL fix) wins, and a verdict
//     reached on an older config never disables a newer one;
//   - Active otherwise.
//
// Versions are Kafka offsets, so the rule does not depend on clocks.
func (e *Endpoint) EffectiveStatus() (State, string) {
	if e.ConfigError != nil {
		return Invalid, ProblemText(e.ConfigError)
	}
	if e.Status == Disabled {
		if e.DisabledReason != "" {
			return Disabled, e.DisabledReason
		}
		return Disabled, ReasonOperator
	}
	if ps := e.PipelineStatus; ps != nil && ps.State == Disabled && ps.ConfigVersion >= e.Version {
		return Disabled, ps.Reason
	}
	return Active, ""
}

// Active reports whether the effective status is Active.
func (e *Endpoint) Active() bool {
	s, _ := e.EffectiveStatus()
	return s == Active
}

// ActiveSecrets returns the secrets that sign at now (no ExpiresAt, or
// ExpiresAt after now), in configured order.
func (e *Endpoint) ActiveSecrets(now time.Time) []Secret {
	out := make([]Secret, 0, len(e.Secrets))
	for _, s := range e.Secrets {
		if s.Active(now) {
			out = append(out, s)
		}
	}
	return out
}

// Clone returns a deep copy of e, safe to modify.
func (e *Endpoint) Clone() *Endpoint {
	c := *e
	c.Secrets = make([]Secret, len(e.Secrets))
	for i, s := range e.Secrets {
		c.Secrets[i] = s
		if s.ExpiresAt != nil {
			t := *s.ExpiresAt
			c.Secrets[i].ExpiresAt = &t
		}
	}
	c.EventTypes = slices.Clone(e.EventTypes)
	if e.PipelineStatus != nil {
		ps := *e.PipelineStatus
		c.PipelineStatus = &ps
	}
	return &c
}

// Masked returns a copy of e whose secrets are masked with [MaskSecret] and
// whose URL has any password redacted (url.URL.Redacted), for list and get
// output. It cannot be written back: masked secrets do not validate.
func (e *Endpoint) Masked() *Endpoint {
	c := e.Clone()
	for i := range c.Secrets {
		c.Secrets[i].Value = MaskSecret(c.Secrets[i].Value)
	}
	if u, err := url.Parse(c.URL); err == nil && u.User != nil {
		c.URL = u.Redacted()
	} else if err != nil && strings.Contains(c.URL, "@") {
		c.URL = "(unparsable URL with user information, hidden)"
	}
	return c
}

// ProblemText renders a ConfigError (or any Validate error) on one line:
// "field: problem; field: problem".
func ProblemText(err error) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// Reasons a pending delivery no longer belongs to its endpoint (see
// [Endpoint.Mismatch]); they are the error_class of its abandoned attempt
// row.
const (
	ReasonEndpointDeleted     = "endpoint_deleted"     // no endpoint has the ID any more
	ReasonEndpointRecreated   = "endpoint_recreated"   // the ID now names another incarnation
	ReasonTenantMismatch      = "tenant_mismatch"      // the endpoint's tenant is not the event's
	ReasonSubscriptionChanged = "subscription_changed" // no pattern of the endpoint matches the event type any more
)

// Mismatch reports why e (nil: deleted) is no longer the endpoint a
// delivery was fanned out for, or "" when it still is. The delivery carries
// the endpoint's incarnation at fan-out, and the event's type and tenant
// ("" for none). The rule, checked before every attempt:
//
//   - the same incarnation, when both the delivery and the endpoint have
//     one (a delete and re-create through the Store makes a new one);
//   - the same tenant as the event (an event without tenantid goes only to
//     endpoints without a tenant, as in fan-out);
//   - a pattern that still matches the event type.
//
// A record written by a producer that knows nothing of incarnations has
// none, and a record cannot tell an update in place from a delete and
// re-create (the tombstone between them may be compacted away, and views
// must agree), so such a record's identity is unknown, not new. The tenant
// and subscription checks do not depend on the incarnation: they catch a
// tenant changed in place, a filter narrowed, and a delete and re-create
// for another tenant or another subscription, whoever wrote them. What
// they let through is a re-create without an incarnation for the same
// tenant with a matching filter: the delivery goes to the same tenant's new
// endpoint. Changes that keep the identity (URL, secrets, pacing,
// timeouts) apply to pending deliveries.
func (e *Endpoint) Mismatch(incarnation, eventType, tenant string) string {
	switch {
	case e == nil:
		return ReasonEndpointDeleted
	case e.Incarnation != "" && incarnation != "" && e.Incarnation != incarnation:
		return ReasonEndpointRecreated
	case e.TenantID != tenant:
		return ReasonTenantMismatch
	case !MatchesType(e.EventTypes, eventType):
		return ReasonSubscriptionChanged
	}
	return ""
}

// NewIncarnation returns a new endpoint incarnation: 32 random hex
// characters (crypto/rand).
func NewIncarnation() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// MaskSecret shows enough of a secret to tell secrets apart without
// revealing them: "whsec_" and the first 4 characters of the key's base64,
// then "…" (e.g. "whsec_MfKQ…"). Anything else becomes "…".
func MaskSecret(s string) string {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	// A secret too short to be valid would be shown whole.
	if !ok || len(rest) < 4*maskedSecretChars {
		return "…"
	}
	return SecretPrefix + rest[:maskedSecretChars] + "…"
}

// ParseSecret checks a "whsec_" secret: standard base64 (with padding) of
// a 24 to 64 byte key. It is webhook.ParseSecret, the one parser of the
// signing side, so what is accepted here always signs.
func ParseSecret(s string) error {
	_, err := webhook.ParseSecret(s)
	return err
}

// NewSecret returns a new "whsec_" secret of 32 random bytes (crypto/rand).
func NewSecret() string { return webhook.NewSecret().String() }

// endpointJSON is the stored form of an Endpoint.
type endpointJSON struct {
	ID             string    `json:"id"`
	URL            string    `json:"url"`
	Secrets        []Secret  `json:"secrets"`
	EventTypes     []string  `json:"event_types"`
	TenantID       string    `json:"tenantid,omitempty"`
	RatePerSec     float64   `json:"rate_per_sec,omitempty"`
	MaxInFlight    int       `json:"max_in_flight,omitempty"`
	Timeout        string    `json:"timeout,omitempty"`
	ConnectTimeout string    `json:"connect_timeout,omitempty"`
	Status         State     `json:"status,omitempty"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Incarnation    string    `json:"incarnation,omitempty"`
}

// MarshalJSON encodes the stored form (see the package documentation);
// Version, PipelineStatus and ConfigError are not part of it.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	j := endpointJSON{
		ID: e.ID, URL: e.URL, Secrets: e.Secrets, EventTypes: e.EventTypes, TenantID: e.TenantID,
		RatePerSec: e.RatePerSec, MaxInFlight: e.MaxInFlight,
		Status: e.Status, DisabledReason: e.DisabledReason,
		CreatedAt: e.CreatedAt.UTC(), UpdatedAt: e.UpdatedAt.UTC(), Incarnation: e.Incarnation,
	}
	if e.Timeout != 0 {
		j.Timeout = e.Timeout.String()
	}
	if e.ConnectTimeout != 0 {
		j.ConnectTimeout = e.ConnectTimeout.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the stored form. Unknown members are ignored (a
// newer writer may add some); durations are Go duration strings ("10s").
// It does not apply defaults or validate.
func (e *Endpoint) UnmarshalJSON(b []byte) error {
	var j endpointJSON
	// A member of the wrong type still leaves the others decoded (the View
	// shows what it could read of an invalid record).
	jerr := json.Unmarshal(b, &j)
	var typeErr *json.UnmarshalTypeError
	if jerr != nil && !errors.As(jerr, &typeErr) {
		return jerr
	}
	*e = Endpoint{
		ID: j.ID, URL: j.URL, Secrets: j.Secrets, EventTypes: j.EventTypes, TenantID: j.TenantID,
		RatePerSec: j.RatePerSec, MaxInFlight: j.MaxInFlight,
		Status: j.Status, DisabledReason: j.DisabledReason,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, Incarnation: j.Incarnation,
	}
	if typeErr != nil {
		return &FieldError{Field: typeErr.Field, Reason: fmt.Sprintf("JSON %s where %s is expected", typeErr.Value, typeErr.Type)}
	}
	var err error
	if j.Timeout != "" {
		if e.Timeout, err = time.ParseDuration(j.Timeout); err != nil {
			return &FieldError{Field: "timeout", Reason: fmt.Sprintf("not a duration: %q", bounded(j.Timeout))}
		}
	}
	if j.ConnectTimeout != "" {
		if e.ConnectTimeout, err = time.ParseDuration(j.ConnectTimeout); err != nil {
			return &FieldError{Field: "connect_timeout", Reason: fmt.Sprintf("not a duration: %q", bounded(j.ConnectTimeout))}
		}
	}
	return nil
}
