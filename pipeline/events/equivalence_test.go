package events

// The property of issue 8 item 1: every valid JSON serialisation of a valid
// CloudEvent decodes to the same event and the same webhook body. The forms
// are made by a small re-serialiser over a parsed tree, so member order,
// whitespace and string escapes vary while the JSON value stays the same.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookrelay/hookrelay/pipeline/webhook"
)

// jnode is a parsed JSON value that keeps member order and number text.
type jnode struct {
	kind    byte // '{', '[', '"', 'n' (number), 'l' (true, false, null)
	members []jmember
	elems   []*jnode
	text    string // string value, number text, or literal
}

type jmember struct {
	name  string
	value *jnode
}

func parseTree(t testing.TB, b []byte) *jnode {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := readNode(dec)
	if err != nil {
		t.Fatalf("parseTree: %v in %q", err, truncate(string(b), 200))
	}
	return n
}

func readNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &jnode{kind: '{'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				val, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.members = append(n.members, jmember{kt.(string), val})
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &jnode{kind: '['}
			for dec.More() {
				val, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, val)
			}
			_, err := dec.Token()
			return n, err
		}
	case string:
		return &jnode{kind: '"', text: v}, nil
	case json.Number:
		return &jnode{kind: 'n', text: string(v)}, nil
	case bool:
		return &jnode{kind: 'l', text: fmt.Sprint(v)}, nil
	case nil:
		return &jnode{kind: 'l', text: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// jstyle is one way to write JSON.
type jstyle struct {
	name      string
	comma     string // after a comma (before any newline)
	colon     string // between name and value, e.g. ":" or ": " or " : "
	indent    string // "" for one line
	newline   string // "\n" or "\r\n" when indented
	ascii     bool   // escape every non-ASCII character as \uXXXX (Python's ensure_ascii)
	slash     bool   // escape "/" as "\/"
	allEscape bool   // escape every character of every string (names too) as \uXXXX
	reverse   bool   // write the top-level members in reverse order
	around    string // whitespace before and after the document
}

var jstyles = []jstyle{
	{name: "compact", colon: ":"},
	{name: "python-default", comma: " ", colon: ": ", ascii: true},
	{name: "spaces-everywhere", comma: " ", colon: " : ", around: " \t"},
	{name: "indent-lf", colon: ": ", indent: "  ", newline: "\n", around: "\n"},
	{name: "indent-crlf-tabs", colon: ": ", indent: "\t", newline: "\r\n", around: "\r\n"},
	{name: "reordered", colon: ":", reverse: true},
	{name: "escaped-slash-ascii", colon: ":", ascii: true, slash: true},
	{name: "all-escaped", comma: " ", colon: ": ", allEscape: true, reverse: true},
}

func (s jstyle) write(n *jnode) []byte {
	var b bytes.Buffer
	b.WriteString(s.around)
	s.node(&b, n, 0, true)
	b.WriteString(s.around)
	return b.Bytes()
}

func (s jstyle) nl(b *bytes.Buffer, depth int) {
	if s.indent == "" {
		return
	}
	b.WriteString(s.newline)
	b.WriteString(strings.Repeat(s.indent, depth))
}

func (s jstyle) node(b *bytes.Buffer, n *jnode, depth int, top bool) {
	switch n.kind {
	case '{':
		ms := n.members
		if top && s.reverse {
			ms = make([]jmember, len(n.members))
			for i, m := range n.members {
				ms[len(ms)-1-i] = m
			}
		}
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
				b.WriteString(s.comma)
			}
			s.nl(b, depth+1)
			s.str(b, m.name)
			b.WriteString(s.colon)
			s.node(b, m.value, depth+1, false)
		}
		if len(ms) > 0 {
			s.nl(b, depth)
		}
		b.WriteByte('}')
	case '[':
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteByte(',')
				b.WriteString(s.comma)
			}
			s.nl(b, depth+1)
			s.node(b, e, depth+1, false)
		}
		if len(n.elems) > 0 {
			s.nl(b, depth)
		}
		b.WriteByte(']')
	case '"':
		s.str(b, n.text)
	default:
		b.WriteString(n.text)
	}
}

func (s jstyle) str(b *bytes.Buffer, v string) {
	b.WriteByte('"')
	for _, r := range v {
		switch {
		case s.allEscape:
			writeU(b, r)
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '/' && s.slash:
			b.WriteString(`\/`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			writeU(b, r)
		case r >= 0x80 && s.ascii:
			writeU(b, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func writeU(b *bytes.Buffer, r rune) {
	if r > 0xFFFF {
		r1, r2 := utf16.EncodeRune(r)
		writeHex4(b, r1, "0123456789ABCDEF") // upper-case hex for the high half: both cases must decode
		writeHex4(b, r2, "0123456789abcdef")
		return
	}
	writeHex4(b, r, "0123456789abcdef")
}

func writeHex4(b *bytes.Buffer, r rune, digits string) {
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(digits[(r>>shift)&0xF])
	}
}

// fannedOut is what fan-out makes of one event: the attributes it routes
// and logs by, and the exact webhook body bytes.
type fannedOut struct {
	ID, Source, Type, Subject, DataContentType, DataSchema string
	Time                                                   time.Time
	Extensions                                             map[string]any
	Tenant                                                 string
	Body                                                   string
}

func deliveryOf(t testing.TB, r *kgo.Record) fannedOut {
	t.Helper()
	ev, err := Decode(r, 8<<20)
	if err != nil {
		t.Fatalf("Decode: %v\nvalue: %s", err, truncate(string(r.Value), 400))
	}
	data, err := DataJSON(ev)
	if err != nil {
		t.Fatalf("DataJSON: %v", err)
	}
	ts := ev.Time()
	if ts.IsZero() {
		ts = r.Timestamp
	}
	body, err := webhook.Body(ev.Type(), ts, data)
	if err != nil {
		t.Fatalf("webhook.Body: %v", err)
	}
	if !utf8.Valid(body) || !json.Valid(body) {
		t.Fatalf("body is not valid UTF-8 JSON: %q", body)
	}
	return fannedOut{
		ID: ev.ID(), Source: ev.Source(), Type: ev.Type(), Subject: ev.Subject(),
		DataContentType: ev.DataContentType(), DataSchema: ev.DataSchema(), Time: ev.Time(),
		Extensions: ev.Extensions(), Tenant: Tenant(ev), Body: string(body),
	}
}

var recordTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// checkEquivalentForms decodes value (a structured event) in every style
// and fails unless each gives the delivery of the compact form.
func checkEquivalentForms(t *testing.T, name string, value []byte) {
	t.Helper()
	tree := parseTree(t, value)
	var want fannedOut
	for i, s := range jstyles {
		form := s.write(tree)
		got := deliveryOf(t, &kgo.Record{Value: form, Headers: ceJSON, Timestamp: recordTime})
		if i == 0 {
			want = got
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: form %s decodes differently\n got %+v\nwant %+v\nform: %s", name, s.name, got, want, truncate(string(form), 600))
		}
	}
}

func TestEquivalentSerialisations(t *testing.T) {
	events := map[string]string{
		"issue example: data_base64": `{"specversion":"1.0","id":"b64-min-1","source":"/qa","type":"c01.bin","data_base64":"AAECAw=="}`,
		"data_base64 with + and / and a content type": `{"specversion":"1.0","id":"b64-2","source":"https://example.com/a/b","type":"c01.bin",` +
			`"datacontenttype":"application/octet-stream","data_base64":"+/+/AAECAw8QERL/7+/v","time":"2018-04-05T17:31:00Z"}`,
		"data_base64 declared JSON": `{"specversion":"1.0","id":"b64-3","source":"/qa","type":"t","datacontenttype":"application/json","data_base64":"eyJhIjpbMSwgMl0sICJiIjogIsOpIn0="}`,
		"JSON data with escapes, non-ASCII and numbers": `{"specversion":"1.0","id":"json-1","source":"urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66","type":"com.example.someevent",` +
			`"subject":"caf\u00e9/1","time":"2018-04-05T17:31:00.123456Z","dataschema":"https://example.com/schema.json","datacontenttype":"application/json",` +
			`"comexampleextension1":"value","comexampleothervalue":5,"flag":true,"unsetextension":null,"tenantid":"acme",` +
			`"data":{"name":"Zoë 😀","path":"a/b\\c","quote":"say \"hi\"","lines":"one\ntwo\tthree","ls":"\u2028","ctl":"\u0001","n":[1,-0,1.5e3,12345678901234567890,0.1],"empty":{},"none":[],"nil":null,"t":true}}`,
		"+json data":                      `{"specversion":"1.0","id":"json-2","source":"/qa","type":"t","datacontenttype":"application/vnd.github+json; charset=utf-8","data":[{"url":"https://api.github.com/x"},"é"]}`,
		"no datacontenttype, string data": `{"specversion":"1.0","id":"json-3","source":"/qa","type":"t","data":"I'm just a string / é"}`,
		"text data":                       `{"specversion":"1.0","id":"text-1","source":"/qa","type":"t","datacontenttype":"text/plain; charset=utf-8","data":"héllo\r\nwörld / \"q\" \\ 😀"}`,
		"xml data":                        `{"specversion":"1.0","id":"xml-1","source":"/mycontext","type":"com.example.someevent","datacontenttype":"application/xml","data":"<much wow=\"xml\"/>"}`,
		"explicit null data":              `{"specversion":"1.0","id":"null-1","source":"/qa","type":"t","datacontenttype":"application/json","data":null}`,
		"no data":                         `{"specversion":"1.0","id":"none-1","source":"/qa","type":"t","subject":null,"time":null}`,
		"time with offset":                `{"specversion":"1.0","id":"time-1","source":"/qa","type":"t","time":"2018-04-05T19:31:00+02:00","data":{}}`,
		"trace and tenant":                `{"specversion":"1.0","id":"tr-1","source":"/qa","type":"t","tenantid":"t-9","traceparent":"` + traceParent + `","tracestate":"rojo=00f067aa0ba902b7","data":{"a":1}}`,
	}
	for name, v := range events {
		t.Run(name, func(t *testing.T) { checkEquivalentForms(t, name, []byte(v)) })
	}
}

// TestEquivalentSerialisationsBinaryData: in binary mode the JSON data is
// the value as is; any formatting of it gives the same body, and the same
// body as the structured event.
func TestEquivalentSerialisationsBinaryData(t *testing.T) {
	data := `{"name":"Zoë 😀","path":"a/b","q":"\"","n":[1,2.5],"o":{"x":null}}`
	structuredRec := &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"bin-1","source":"/qa","type":"t","time":"2018-04-05T17:31:00Z","datacontenttype":"application/json","data":` + data + `}`), Headers: ceJSON}
	want := deliveryOf(t, structuredRec).Body
	tree := parseTree(t, []byte(data))
	for _, s := range jstyles {
		s.reverse = false // the data's own member order is the producer's and is kept
		r := &kgo.Record{Value: s.write(tree), Headers: hdrs("ce_specversion", "1.0", "ce_id", "bin-1", "ce_source", "/qa", "ce_type", "t",
			"ce_time", "2018-04-05T17:31:00Z", "content-type", "application/json")}
		if got := deliveryOf(t, r).Body; got != want {
			t.Errorf("binary form %s: body\n got %s\nwant %s", s.name, got, want)
		}
	}
}

// corpusDir is the demo corpus (cmd/hookrelay-demo/examples.go): the npm
// package @octokit/webhooks-examples installed by `make deps`.
var corpusDir = filepath.Join("..", "..", "e2e", "receiver", "node_modules", "@octokit", "webhooks-examples")

// corpusPayloads returns every distinct example payload of the corpus's
// indexes (the GHES indexes repeat many payloads byte for byte), by
// "<index>/<event name>/<n>" as the demo names them.
func corpusPayloads(t *testing.T) map[string]json.RawMessage {
	if _, err := os.Stat(corpusDir); err != nil {
		t.Skipf("%s not installed (make deps): %v", corpusDir, err)
	}
	out := map[string]json.RawMessage{}
	seen := map[string]bool{}
	for _, index := range []string{"api.github.com", "ghes-31", "ghes-32", "ghes-33", "ghes-34", "ghes-35"} {
		f, err := os.Open(filepath.Join(corpusDir, index, "index.json"))
		if os.IsNotExist(err) && index != "api.github.com" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var defs []struct {
			Name     string            `json:"name"`
			Examples []json.RawMessage `json:"examples"`
		}
		if err := json.Unmarshal(raw, &defs); err != nil {
			t.Fatal(err)
		}
		for _, d := range defs {
			for i, ex := range d.Examples {
				var c bytes.Buffer
				if err := json.Compact(&c, ex); err != nil {
					t.Fatal(err)
				}
				if !seen[c.String()] {
					seen[c.String()] = true
					out[fmt.Sprintf("%s/%s/%d", index, d.Name, i)] = c.Bytes()
				}
			}
		}
	}
	return out
}

// TestEquivalentSerialisationsDemoCorpus re-serialises every event of the
// demo corpus (as the demo publishes it: structured, datacontenttype
// application/json, and every payload also in binary mode) in each style
// and asserts identical deliveries.
func TestEquivalentSerialisationsDemoCorpus(t *testing.T) {
	payloads := corpusPayloads(t)
	if len(payloads) < 300 {
		t.Fatalf("only %d payloads in the corpus", len(payloads))
	}
	failures := 0
	for id, p := range payloads {
		var compact bytes.Buffer
		if err := json.Compact(&compact, p); err != nil {
			t.Fatal(err)
		}
		var ev bytes.Buffer
		ev.WriteString(`{"specversion":"1.0","id":`)
		ev.Write(jsonString(id))
		ev.WriteString(`,"source":"https://github.com/octokit/webhooks-examples","type":"github.example","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","data":`)
		ev.Write(compact.Bytes())
		ev.WriteString(`}`)
		tree := parseTree(t, ev.Bytes())
		dataTree := parseTree(t, compact.Bytes())
		var want fannedOut
		for i, s := range jstyles {
			got := deliveryOf(t, &kgo.Record{Value: s.write(tree), Headers: ceJSON})
			if i == 0 {
				want = got
			} else if !reflect.DeepEqual(got, want) {
				failures++
				if failures <= 5 {
					t.Errorf("%s: form %s decodes differently\n got %s\nwant %s", id, s.name, truncate(got.Body, 300), truncate(want.Body, 300))
				}
			}
			s.reverse = false // the data's own member order is kept
			bin := &kgo.Record{Value: s.write(dataTree), Headers: hdrs("ce_specversion", "1.0", "ce_id", id,
				"ce_source", "https://github.com/octokit/webhooks-examples", "ce_type", "github.example",
				"ce_time", "2026-01-02T03:04:05Z", "content-type", "application/json")}
			if got := deliveryOf(t, bin); got.Body != want.Body {
				failures++
				if failures <= 5 {
					t.Errorf("%s: binary form %s gives another body\n got %s\nwant %s", id, s.name, truncate(got.Body, 300), truncate(want.Body, 300))
				}
			}
		}
	}
	if failures > 0 {
		t.Errorf("%d of %d forms differ", failures, len(payloads)*len(jstyles)*2)
	}
}
