package session

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

func TestATokenCarriesTheParamsOfOneInitializeRequestOnly(t *testing.T) {
	long := `{"clientInfo":{"name":"` + strings.Repeat("n", maxInit) + `"}}`
	spaced := `{"capabilities": {},` + strings.Repeat(" ", maxInit) + `"clientInfo": {"name": "a"}}`
	tests := []struct {
		name string
		body string
		// want is the params carried, nil: none.
		want []byte
	}{
		{"an initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + clientInit + `}`, []byte(clientInit)},
		{"an initialize written with whitespace, compacted", "{\"jsonrpc\": \"2.0\", \"params\": {\n  \"capabilities\": { },\n  \"clientInfo\": {\"name\": \"a b\"}\n}, \"id\": 1, \"method\": \"initialize\"}",
			[]byte(`{"capabilities":{},"clientInfo":{"name":"a b"}}`)},
		{"params under an escaped key", `{"jsonrpc":"2.0","id":1,"method":"initialize","par\u0061ms":{"a":1}}`, []byte(`{"a":1}`)},
		{"spaced params that fit once compacted", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + spaced + `}`,
			[]byte(`{"capabilities":{},"clientInfo":{"name":"a"}}`)},
		{"params over the bound", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + long + `}`, nil},
		{"params read past what is compacted", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1` + strings.Repeat(" ", maxInitRead) + `}}`, nil},
		{"an initialize in a batch", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}]`, nil},
		{"params that are an array", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":[1]}`, nil},
		{"params that are null", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":null}`, nil},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, nil},
		{"an initialize notification", `{"jsonrpc":"2.0","method":"initialize","params":{"a":1}}`, nil},
		{"another request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPins(t, "")
			x := exchange(t, tt.body, nil)
			selected := "10.0.0.7:8080"
			caddyhttp.SetVar(x.Request.Context(), SelectedVar, &selected)
			hdr := http.Header{"Mcp-Session-Id": {"upstream-own-id"}}
			hooked(t, p, x).Header(x, http.StatusOK, hdr)
			s, err := p.ring().Open(hdr.Get("Mcp-Session-Id"), x.Start, p.ttl, nil)
			require.NoError(t, err, "a session is opened whatever its initialize carried")
			assert.Equal(t, "upstream-own-id", s.ID)
			assert.Equal(t, tt.want, s.Params)
		})
	}
}

func TestParamsThatLeaveNoRoomForTheSessionIdAreNotCarried(t *testing.T) {
	p := testPins(t, "")
	x := exchange(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+clientInit+`}`, nil)
	id := strings.Repeat("i", 6000)
	hdr := http.Header{"Mcp-Session-Id": {id}}
	hooked(t, p, x).Header(x, http.StatusOK, hdr)
	token := hdr.Get("Mcp-Session-Id")
	require.NotEmpty(t, token, "the session is opened")
	s, err := p.ring().Open(token, x.Start, p.ttl, nil)
	require.NoError(t, err)
	assert.Equal(t, id, s.ID)
	assert.Nil(t, s.Params, "it will not be reopened")
}

// session opens a session through p, answered by upstream "10.0.0.7:8080"
// with id, and returns the client's token.
func session(t testing.TB, p *Pins, id string) string {
	t.Helper()
	x := exchange(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+clientInit+`}`, nil)
	selected := "10.0.0.7:8080"
	caddyhttp.SetVar(x.Request.Context(), SelectedVar, &selected)
	hdr := http.Header{"Mcp-Session-Id": {id}}
	hooked(t, p, x).Header(x, http.StatusOK, hdr)
	return hdr.Get("Mcp-Session-Id")
}

func TestOnlyARequestThatCanBeSentAgainIsReinitialized(t *testing.T) {
	p := testPins(t, "")
	token := session(t, p, "upstream-own-id")
	withSession := map[string]string{"Mcp-Session-Id": token}
	tests := []struct {
		name   string
		x      *feature.Exchange
		reopen bool
	}{
		{"a POST of the session", exchange(t, call, withSession), true},
		{"the GET of its stream", getOf(t, withSession), true},
		{"its DELETE", deleteOf(t, withSession), false},
		{"a POST of no session", exchange(t, call, nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params, ok := hooked(t, p, tt.x).Reinitialize(tt.x)
			assert.Equal(t, tt.reopen, ok)
			if tt.reopen {
				assert.JSONEq(t, clientInit, string(params))
			} else {
				assert.Nil(t, params)
			}
		})
	}

	first := sealV1(t, p.ring(), Session{Upstream: "10.0.0.7:8080", ID: "upstream-own-id", Issued: p.now()}, nil)
	x := exchange(t, call, map[string]string{"Mcp-Session-Id": first})
	_, ok := hooked(t, p, x).Reinitialize(x)
	assert.False(t, ok, "a token that carries no params")
}

func getOf(t *testing.T, headers map[string]string) *feature.Exchange {
	x := featuretest.Get(t)
	x.Request = x.Request.WithContext(context.WithValue(x.Request.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	for k, v := range headers {
		x.Request.Header.Set(k, v)
	}
	return x
}

func deleteOf(t *testing.T, headers map[string]string) *feature.Exchange {
	x := getOf(t, headers)
	x.Request.Method = http.MethodDelete
	return x
}

// initializeSent is the initialize the core sent to reopen a session,
// answered by upstream: the selection policy's choice, or (selected
// false) the address the proxy dialled, as its replacer gives it.
func initializeSent(upstream string, selected bool) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	vars := map[string]any{}
	repl := caddy.NewReplacer()
	if selected {
		vars[SelectedVar] = &upstream
	} else {
		repl.Set("http.reverse_proxy.upstream.hostport", upstream)
	}
	ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars)
	return r.WithContext(context.WithValue(ctx, caddy.ReplacerCtxKey, repl))
}

func TestAReopenedSessionIsTheOneTheClientsTokenNames(t *testing.T) {
	for _, selected := range []bool{true, false} {
		t.Run(fmt.Sprintf("selected=%v", selected), func(t *testing.T) { reopenedAsTokenNames(t, selected) })
	}
}

func reopenedAsTokenNames(t *testing.T, selected bool) {
	p := testPins(t, "")
	token := session(t, p, "lost-id")
	before := featuretest.Counted(t, sessionsReopened)

	x := exchange(t, call, map[string]string{"Mcp-Session-Id": token})
	o := hooked(t, p, x)
	require.Equal(t, "lost-id", x.Request.Header.Get("Mcp-Session-Id"))
	_, ok := o.Reinitialize(x)
	require.True(t, ok)
	o.Reopened(x, initializeSent("10.0.0.8:8080", selected), "new-id")
	assert.Equal(t, []string{"new-id"}, x.Request.Header["Mcp-Session-Id"], "the request is sent again to the new session")
	assert.Equal(t, "10.0.0.8:8080", x.Replica)
	pin, _ := caddyhttp.GetVar(x.Request.Context(), PinVar).(*string)
	require.NotNil(t, pin)
	assert.Equal(t, "10.0.0.8:8080", *pin, "on the upstream that answered the initialize")
	assert.Equal(t, before+1, featuretest.Counted(t, sessionsReopened))

	hdr := http.Header{"Mcp-Session-Id": {"new-id"}}
	o.Header(x, http.StatusOK, hdr)
	assert.Equal(t, []string{token}, hdr["Mcp-Session-Id"], "the client keeps its token")

	next := exchange(t, call, map[string]string{"Mcp-Session-Id": token})
	o = hooked(t, p, next)
	assert.Equal(t, "new-id", next.Request.Header.Get("Mcp-Session-Id"), "the next request goes to the new session, with no second reopen")
	assert.Equal(t, "10.0.0.8:8080", next.Replica)
	params, ok := o.Reinitialize(next)
	assert.True(t, ok, "and may be reopened again")
	assert.JSONEq(t, clientInit, string(params))
	assert.Equal(t, 1, p.Status().Reopened)
}

func TestASecondReopeningReplacesTheFirst(t *testing.T) {
	p := testPins(t, "")
	token := session(t, p, "lost-id")
	for _, id := range []string{"second-id", "third-id"} {
		x := exchange(t, call, map[string]string{"Mcp-Session-Id": token})
		hooked(t, p, x).Reopened(x, initializeSent("10.0.0.7:8080", true), id)
		next := exchange(t, call, map[string]string{"Mcp-Session-Id": token})
		hooked(t, p, next)
		assert.Equal(t, id, next.Request.Header.Get("Mcp-Session-Id"))
	}
	assert.Equal(t, 1, p.Status().Reopened)

	other := session(t, p, "lost-id")
	x := exchange(t, call, map[string]string{"Mcp-Session-Id": other})
	hooked(t, p, x)
	assert.Equal(t, "lost-id", x.Request.Header.Get("Mcp-Session-Id"), "another token of the same upstream session is not remapped")
}

func TestAReopeningWithoutASessionIdChangesNothing(t *testing.T) {
	p := testPins(t, "")
	token := session(t, p, "lost-id")
	before := featuretest.Counted(t, sessionsReopened)
	x := exchange(t, call, map[string]string{"Mcp-Session-Id": token})
	hooked(t, p, x).Reopened(x, initializeSent("10.0.0.8:8080", true), "")
	assert.Equal(t, "lost-id", x.Request.Header.Get("Mcp-Session-Id"))
	assert.Equal(t, "10.0.0.7:8080", x.Replica)
	assert.Equal(t, before, featuretest.Counted(t, sessionsReopened))
	assert.Zero(t, p.Status().Reopened)
}

// A bound session is remapped for its token, which opens only for its
// principal: the remap is reached past Bind.
func TestARemappedBoundSessionOpensForItsPrincipalOnly(t *testing.T) {
	p := testPins(t, "{http.request.header.Authorization}")
	alice := map[string]string{"Authorization": "Bearer alice"}
	x := exchange(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+clientInit+`}`, alice)
	hdr := http.Header{"Mcp-Session-Id": {"lost-id"}}
	hooked(t, p, x).Header(x, http.StatusOK, hdr)
	token := hdr.Get("Mcp-Session-Id")

	x = exchange(t, call, map[string]string{"Mcp-Session-Id": token, "Authorization": "Bearer alice"})
	hooked(t, p, x).Reopened(x, initializeSent("10.0.0.8:8080", true), "new-id")
	_, ref := p.Admit(exchange(t, call, map[string]string{"Mcp-Session-Id": token, "Authorization": "Bearer bob"}))
	require.NotNil(t, ref)
	assert.Equal(t, http.StatusNotFound, ref.Plain.Status)
	x = exchange(t, call, map[string]string{"Mcp-Session-Id": token, "Authorization": "Bearer alice"})
	hooked(t, p, x)
	assert.Equal(t, "new-id", x.Request.Header.Get("Mcp-Session-Id"))
}

// Opening a token consults the remap: it allocates no more for it, empty
// or holding the token's session.
func TestOpeningARemappedTokenAllocatesNoMore(t *testing.T) {
	p := testPins(t, "")
	token := session(t, p, "lost-id")
	x := exchange(t, call, nil)
	values := []string{token}
	admit := func() {
		values[0] = token // the header as the client sent it
		x.Request.Header["Mcp-Session-Id"] = values
		u, ref := p.Admit(x)
		if ref != nil {
			t.Fatal(ref.Cause)
		}
		u.Undo(x.Start, true)
	}
	plain := testing.AllocsPerRun(200, admit)
	reopened := exchange(t, call, map[string]string{"Mcp-Session-Id": token})
	hooked(t, p, reopened).Reopened(reopened, initializeSent("10.0.0.8:8080", true), "new-id")
	assert.Equal(t, plain, testing.AllocsPerRun(200, admit))
	assert.Equal(t, "new-id", x.Request.Header.Get("Mcp-Session-Id"))
}

// BenchmarkAdmit admits a request of a session, its token carrying the
// client's initialize: one this node never reopened, then one it did.
func BenchmarkAdmit(b *testing.B) {
	p := testPins(b, "")
	token := session(b, p, "lost-id")
	x := exchange(b, call, nil)
	values := []string{token}
	admit := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			values[0] = token
			x.Request.Header["Mcp-Session-Id"] = values
			u, ref := p.Admit(x)
			if ref != nil {
				b.Fatal(ref.Cause)
			}
			u.Undo(x.Start, true)
		}
	}
	b.Run("not reopened", admit)
	reopened := exchange(b, call, map[string]string{"Mcp-Session-Id": token})
	hooked(b, p, reopened).Reopened(reopened, initializeSent("10.0.0.8:8080", true), "new-id")
	b.Run("reopened", admit)
}
