package session

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

const testSecret = "a-session-secret-for-the-tests-0123456789"

func testPins(t testing.TB, bind string) *Pins {
	t.Helper()
	p, err := New(caddy.Context{}, &Config{Secrets: []string{testSecret}, Bind: bind}, 30*time.Second, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(p.Release)
	return p
}

// exchange is a POST of body with the request variables Caddy's server
// gives every request, and the headers set.
func exchange(t testing.TB, body string, headers map[string]string) *feature.Exchange {
	x := featuretest.Post(t, body)
	x.Request = x.Request.WithContext(context.WithValue(x.Request.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	for k, v := range headers {
		x.Request.Header.Set(k, v)
	}
	return x
}

const (
	initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	call       = `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"a"}}`
)

// hooked admits x and returns the hook on its answer.
func hooked(t testing.TB, p *Pins, x *feature.Exchange) *opened {
	t.Helper()
	u, ref := p.Admit(x)
	require.Nil(t, ref)
	return u.(feature.Responder).Open(x).(*opened)
}

func TestAnAnswersSessionIdIsSealedAndOpensToItsReplica(t *testing.T) {
	p := testPins(t, "")
	x := exchange(t, initialize, nil)
	selected := "10.0.0.7:8080"
	caddyhttp.SetVar(x.Request.Context(), SelectedVar, &selected)
	o := hooked(t, p, x)
	hdr := http.Header{"Mcp-Session-Id": {"upstream-own-id"}}
	o.Header(x, http.StatusOK, hdr)
	token := hdr.Get("Mcp-Session-Id")
	require.NotEqual(t, "upstream-own-id", token, "the client never sees the upstream's own id")

	next := exchange(t, call, map[string]string{"Mcp-Session-Id": token})
	o = hooked(t, p, next)
	assert.Equal(t, "upstream-own-id", next.Request.Header.Get("Mcp-Session-Id"), "the upstream gets its own id back")
	assert.Equal(t, selected, next.Replica)
	assert.Equal(t, &o.session.Upstream, caddyhttp.GetVar(next.Request.Context(), PinVar), "the selection policy learns the replica")
	assert.Equal(t, token, caddyhttp.GetVar(next.Request.Context(), feature.ClientSessionVar), "what keys on the client's session reads its token")

	hdr = http.Header{"Mcp-Session-Id": {"upstream-own-id"}}
	o.Header(next, http.StatusOK, hdr)
	assert.Equal(t, []string{token}, hdr["Mcp-Session-Id"], "the same session keeps the client's token")
}

func TestTheUpstreamsOwnIdLeavesNeitherInA1xxNorInATrailer(t *testing.T) {
	tests := []struct {
		name  string
		write func(o *opened, x *feature.Exchange, hdr http.Header)
		// want is the session header the client is sent at the end.
		want []string
	}{
		{"an informational header", func(o *opened, x *feature.Exchange, hdr http.Header) {
			hdr.Set("Mcp-Session-Id", "upstream-own-id")
			o.Header(x, http.StatusEarlyHints, hdr)
		}, nil},
		{"a declared trailer after an answer without a session", func(o *opened, x *feature.Exchange, hdr http.Header) {
			o.Header(x, http.StatusOK, hdr)
			hdr.Set("Mcp-Session-Id", "upstream-own-id")
			o.Trailer(x, hdr)
		}, nil},
		{"an undeclared trailer", func(o *opened, x *feature.Exchange, hdr http.Header) {
			o.Header(x, http.StatusOK, hdr)
			hdr[http.TrailerPrefix+"Mcp-Session-Id"] = []string{"upstream-own-id"}
			o.Trailer(x, hdr)
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := exchange(t, call, nil)
			o := hooked(t, testPins(t, ""), x)
			hdr := http.Header{}
			tt.write(o, x, hdr)
			assert.Equal(t, tt.want, hdr["Mcp-Session-Id"])
			assert.NotContains(t, hdr, http.TrailerPrefix+"Mcp-Session-Id")
		})
	}
}

func TestATokenThatDoesNotOpenIsASessionNotFound(t *testing.T) {
	tests := []struct {
		name    string
		bind    string
		body    string
		headers map[string]string
		// status is the HTTP status of the answer; plain: it is the 404
		// the clients act on, not an envelope.
		status int
		plain  bool
		says   string
	}{
		{"a token never sealed", "", call, map[string]string{"Mcp-Session-Id": "not-a-token"}, http.StatusNotFound, true,
			`{"jsonrpc":"2.0","id":"c-1","error":{"code":-32001,"message":"Session not found: not a session of this gateway for these credentials; initialize a new session"}}`},
		{"an initialize without a principal to bind to", "{http.request.header.Authorization}", initialize, nil, http.StatusForbidden, false,
			"This MCP gateway opens sessions only for authenticated clients"},
		{"a token without the principal it is bound to", "{http.request.header.Authorization}", call, map[string]string{"Mcp-Session-Id": "anything"}, http.StatusNotFound, true,
			"not a session of this gateway for these credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ref := testPins(t, tt.bind).Admit(exchange(t, tt.body, tt.headers))
			assert.Nil(t, u)
			require.NotNil(t, ref)
			if !tt.plain {
				assert.Nil(t, ref.Plain)
				assert.Equal(t, tt.status, ref.Status)
				assert.Equal(t, envelope.Forbidden, ref.Envelope.Code)
				assert.Contains(t, ref.Envelope.Message, tt.says)
				return
			}
			require.NotNil(t, ref.Plain)
			assert.Equal(t, tt.status, ref.Plain.Status)
			assert.Equal(t, "SESSION_NOT_FOUND", ref.Plain.Outcome)
			assert.Contains(t, string(ref.Plain.Body), tt.says)
		})
	}
}

func TestAReplicaThatIsGoneIsAnsweredForTheUpstream(t *testing.T) {
	tests := []struct {
		miss   string
		status int
		plain  bool
	}{
		{MissRemoved, http.StatusNotFound, true},
		{MissUnavailable, http.StatusBadGateway, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run("miss "+tt.miss, func(t *testing.T) {
			x := exchange(t, call, nil)
			o := hooked(t, testPins(t, ""), x)
			if tt.miss != "" {
				caddyhttp.SetVar(x.Request.Context(), MissVar, tt.miss)
			}
			ref := o.Unreached(x, context.DeadlineExceeded)
			if tt.status == 0 {
				assert.Nil(t, ref, "the core answers for a failure that is not the session's")
				return
			}
			require.NotNil(t, ref)
			if tt.plain {
				assert.Equal(t, tt.status, ref.Plain.Status)
				return
			}
			assert.Equal(t, tt.status, ref.Status)
			assert.Equal(t, envelope.HandoffUpstreamUnavailable, ref.Envelope.Code)
			assert.Equal(t, 30.0, ref.Envelope.RetryAfter)
		})
	}
}

// Admitting a request that names no session, and letting it go, allocates
// nothing: the request's state is recycled.
func TestAdmittingWithoutASessionAllocatesNothing(t *testing.T) {
	p := testPins(t, "")
	x := exchange(t, call, nil)
	allocs := testing.AllocsPerRun(1000, func() {
		u, ref := p.Admit(x)
		if ref != nil {
			t.Fatal(ref.Cause)
		}
		u.Undo(x.Start, true)
	})
	assert.Zero(t, allocs)
}
