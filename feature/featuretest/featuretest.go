// Package featuretest builds the exchanges a feature's tests feed its
// checks and hooks, as the core fills them, without Caddy.
package featuretest

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Post is the exchange of a POST to /mcp holding body, read as the core
// reads it (at most 64 messages).
func Post(t testing.TB, body string) *feature.Exchange {
	t.Helper()
	msgs, batch, err := jsonrpc.Parse([]byte(body), nil, 64)
	if err != nil {
		t.Fatalf("not a body the core would read: %v", err)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	return &feature.Exchange{Request: r, Messages: msgs, Body: []byte(body), Batch: batch, Era: feature.EraOf(r), Start: time.Now(), Path: r.URL.Path, Replacer: Placeholders{}}
}

// Placeholders are the values of a request's placeholders, by name, as
// Caddy's replacer would give them: a test sets those its feature's
// templates read ({http.vars.client_ip}, say).
type Placeholders map[string]string

// ReplaceAll expands the placeholders of input: each {name} becomes its
// value, or empty when there is none.
func (p Placeholders) ReplaceAll(input, empty string) string {
	if !strings.Contains(input, "{") {
		return input
	}
	var b strings.Builder
	for {
		open := strings.IndexByte(input, '{')
		end := strings.IndexByte(input[max(open, 0):], '}')
		if open < 0 || end < 0 {
			b.WriteString(input)
			return b.String()
		}
		b.WriteString(input[:open])
		name := input[open+1 : open+end]
		if v, ok := p[name]; ok && v != "" {
			b.WriteString(v)
		} else {
			b.WriteString(empty)
		}
		input = input[open+end+1:]
	}
}

// Counted is a counter's value, for a test that checks what a feature
// counts.
func Counted(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatalf("reading a counter: %v", err)
	}
	return m.GetCounter().GetValue()
}

// Get is the exchange of a GET to /mcp: the stream a client opens.
func Get(t testing.TB) *feature.Exchange {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	return &feature.Exchange{Request: r, Era: feature.EraOf(r), Start: time.Now(), Path: r.URL.Path, Replacer: Placeholders{}}
}

// WordCase is an envelope a feature writes, as built, and as it must read.
type WordCase struct {
	Name      string
	Env, Want envelope.Envelope
}

// Words checks that each case's envelope is the one it must be, and reads
// back from its text.
func Words(t *testing.T, cases []WordCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if !reflect.DeepEqual(c.Want, c.Env) {
				t.Fatalf("the envelope is\n%#v\nwant\n%#v", c.Env, c.Want)
			}
			parsed, err := envelope.Parse(c.Env.Text())
			if err != nil {
				t.Fatalf("the envelope does not read back: %v", err)
			}
			if parsed.Message != c.Want.Message {
				t.Fatalf("it reads back with the message %q, want %q", parsed.Message, c.Want.Message)
			}
		})
	}
}
