package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// introspection is the test issuer's introspection endpoint: the answer
// for each token it knows (others are inactive), and the misbehaviours a
// real server cannot be made to show on demand.
type introspection struct {
	imu     sync.Mutex
	answers map[string]map[string]any
	status  int           // answered instead, when set
	stall   chan struct{} // held until closed, when set
	asked   atomic.Int32
}

const (
	gatewayID     = "mcp-gateway"
	gatewaySecret = "s3cret:with/odd&chars"
)

func (is *testIssuer) introspect(w http.ResponseWriter, r *http.Request) {
	is.asked.Add(1)
	is.imu.Lock()
	status, stall, answer := is.status, is.stall, is.answers[r.PostFormValue("token")]
	is.imu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-r.Context().Done():
			return
		}
	}
	if id, secret, ok := r.BasicAuth(); !ok || id != gatewayID || secret != "s3cret%3Awith%2Fodd%26chars" {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	if status != 0 {
		http.Error(w, "down", status)
		return
	}
	if answer == nil {
		answer = map[string]any{"active": false}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(answer)
}

func (is *testIssuer) knows(token string, answer map[string]any) {
	is.imu.Lock()
	defer is.imu.Unlock()
	if is.answers == nil {
		is.answers = map[string]map[string]any{}
	}
	is.answers[token] = answer
}

// opaque is a verifier of the test issuer's tokens that introspects the
// opaque ones, and the answer the issuer gives for an active one.
func opaque(t *testing.T) (*testIssuer, *Verifier, *clock, map[string]any) {
	is := newTestIssuer(t)
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	v := NewVerifier([]Issuer{{URL: is.srv.URL, Introspection: &Introspection{ClientID: gatewayID, ClientSecret: gatewaySecret}}}, 30*time.Second, is.srv.Client(), c.Now, nil)
	answer := map[string]any{
		"active": true, "iss": is.srv.URL, "client_id": "agent-7", "aud": resource, "token_type": "Bearer",
		"scope": "tools:read", "iat": c.now.Unix(), "exp": c.now.Add(time.Hour).Unix(),
	}
	return is, v, c, answer
}

// withMember is a copy of answer with its member k set to val (removed
// when val is nil).
func withMember(answer map[string]any, k string, val any) map[string]any {
	a := maps.Clone(answer)
	if val == nil {
		delete(a, k)
	} else {
		a[k] = val
	}
	return a
}

func TestAnActiveOpaqueTokenIsAskedAboutOnceAndSpeaksForItsClient(t *testing.T) {
	is, v, c, answer := opaque(t)
	ctx := context.Background()
	is.knows("opaque-token_1", answer)

	p, err := v.Verify(ctx, "opaque-token_1", resource)
	require.NoError(t, err)
	assert.Equal(t, ClientSubject+"agent-7", p.Subject, "a client's own token: its client_id, named apart")
	assert.Equal(t, "agent-7", p.ClientID)
	assert.Equal(t, []string{"tools:read"}, p.Scopes)
	assert.Equal(t, is.srv.URL, p.Issuer)
	v2, ok := p.view.Claim("token_type")
	assert.True(t, ok)
	assert.Equal(t, "Bearer", v2)

	c.advance(CacheFor - time.Second)
	_, err = v.Verify(ctx, "opaque-token_1", resource)
	require.NoError(t, err)
	assert.EqualValues(t, 1, is.asked.Load(), "remembered")
	c.advance(time.Second)
	_, err = v.Verify(ctx, "opaque-token_1", resource)
	require.NoError(t, err)
	assert.EqualValues(t, 2, is.asked.Load(), "asked again after CacheFor")

	answer["sub"] = "user-1"
	is.knows("opaque-token_2", answer)
	p, err = v.Verify(ctx, "opaque-token_2", resource)
	require.NoError(t, err)
	assert.Equal(t, "user-1", p.Subject)

	_, err = v.Verify(ctx, is.sign(t, "k1", map[string]any{"iss": is.srv.URL, "sub": "u", "aud": resource, "exp": c.now.Add(time.Hour).Unix()}), resource)
	require.NoError(t, err, "a JWT is still checked by its signature")
	assert.EqualValues(t, 3, is.asked.Load(), "and never introspected")
}

func TestOpaqueTokensTheServerMustNotAcceptAreRefusedAndRemembered(t *testing.T) {
	is, v, c, answer := opaque(t)
	ctx := context.Background()
	with := func(k string, val any) map[string]any { return withMember(answer, k, val) }
	for i, tt := range []struct {
		answer map[string]any
		want   Reason
	}{
		{nil, Inactive}, // unknown to the issuer
		{with("active", false), Inactive},
		{with("active", "true"), Inactive},
		{with("aud", "https://other.example.com/mcp"), WrongAudience},
		{with("aud", nil), WrongAudience},
		{with("iss", "https://other.example.com"), WrongIssuer},
		{with("exp", c.now.Add(-time.Minute).Unix()), Expired},
		{with("nbf", c.now.Add(time.Minute).Unix()), NotYetValid},
		{with("token_type", "DPoP"), Malformed},
		{with("cnf", map[string]any{"jkt": "x"}), Malformed},
		{with("client_id", nil), Malformed}, // no sub either: nobody
	} {
		token := fmt.Sprint("refused-", i)
		if tt.answer != nil {
			is.knows(token, tt.answer)
		}
		_, err := v.Verify(ctx, token, resource)
		assert.Equal(t, tt.want, reason(t, err), "%v", tt.answer)
	}

	asked := is.asked.Load()
	_, err := v.Verify(ctx, "refused-0", resource)
	assert.Equal(t, Inactive, reason(t, err))
	assert.Equal(t, asked, is.asked.Load(), "a refused token is remembered: resending it costs the issuer nothing")
	c.advance(RefusedFor)
	_, err = v.Verify(ctx, "refused-0", resource)
	assert.Equal(t, Inactive, reason(t, err))
	assert.Equal(t, asked+1, is.asked.Load(), "for RefusedFor")

	for _, bad := range []string{"two words", "tab\there", "ünïcode", "=", string(make([]byte, MaxOpaqueToken+1))} {
		_, err := v.Verify(ctx, bad, resource)
		assert.Equal(t, Malformed, reason(t, err), "%q", bad)
	}
	assert.Equal(t, asked+1, is.asked.Load(), "what no bearer token can be is not asked about")
}

func TestAnIssuerThatCannotAnswerIsUnavailableNotARefusedToken(t *testing.T) {
	is, v, _, answer := opaque(t)
	ctx := context.Background()
	is.knows("good", answer)

	for _, status := range []int{http.StatusServiceUnavailable, http.StatusBadGateway} {
		is.imu.Lock()
		is.status = status
		is.imu.Unlock()
		_, err := v.Verify(ctx, "good", resource)
		assert.Equal(t, IssuerUnavailable, reason(t, err))
	}
	is.imu.Lock()
	is.status = 0
	is.imu.Unlock()
	_, err := v.Verify(ctx, "good", resource)
	require.NoError(t, err, "nothing was remembered of the failures")

	st := (&Gate{verifier: v, issuers: []string{is.srv.URL}, cfg: &Config{}}).Status()
	require.NotNil(t, st.Issuers[0].Introspection)
	assert.Equal(t, is.srv.URL+"/introspect", st.Issuers[0].Introspection.Endpoint, "discovered")
	assert.Empty(t, st.Issuers[0].Introspection.Error)

	// The gateway's own credentials refused: the operator's to fix.
	_, v2, _, _ := opaque(t)
	v2.opaque.cfg.ClientSecret = "wrong"
	v2.opaque.keys = v.opaque.keys
	_, err = v2.Verify(ctx, "good", resource)
	assert.Equal(t, IssuerUnavailable, reason(t, err))
	assert.ErrorContains(t, err, "the gateway's client credentials")

	// A slow issuer: the request gives up at its timeout.
	is2, v3, _, _ := opaque(t)
	v3.opaque.timeout = 50 * time.Millisecond
	stall := make(chan struct{})
	defer close(stall)
	is2.imu.Lock()
	is2.stall = stall
	is2.imu.Unlock()
	_, err = v3.Verify(ctx, "good", resource)
	assert.Equal(t, IssuerUnavailable, reason(t, err))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestTokensNeverSeenAreIntrospectedAtABoundedRate(t *testing.T) {
	is, v, c, _ := opaque(t)
	ctx := context.Background()
	for i := range IntrospectionBurst {
		_, err := v.Verify(ctx, fmt.Sprint("random-", i), resource)
		assert.Equal(t, Inactive, reason(t, err))
	}
	_, err := v.Verify(ctx, "one-more", resource)
	assert.Equal(t, IntrospectionLimited, reason(t, err), "not looked at: it may be valid")
	_, err = v.Verify(ctx, "random-0", resource)
	assert.Equal(t, Inactive, reason(t, err), "a token already refused is answered without asking")
	assert.EqualValues(t, IntrospectionBurst, is.asked.Load())

	c.advance(time.Second / IntrospectionRate)
	_, err = v.Verify(ctx, "one-more", resource)
	assert.Equal(t, Inactive, reason(t, err), "the rate refills")
}

func TestAnIntrospectionEndpointThatIsNotOneIsUnavailable(t *testing.T) {
	is := newTestIssuer(t)
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	v := NewVerifier([]Issuer{{URL: is.srv.URL, Introspection: &Introspection{ClientID: gatewayID, ClientSecret: gatewaySecret, Endpoint: is.srv.URL + "/nowhere"}}}, 0, is.srv.Client(), c.Now, nil)
	_, err := v.Verify(context.Background(), "opaque", resource)
	assert.Equal(t, IssuerUnavailable, reason(t, err), "a configured endpoint that is not one (404)")
	assert.ErrorContains(t, err, "check the endpoint")
	assert.Zero(t, is.asked.Load())
}

func TestTokensAlreadyCheckedAreNotLockedOutByAFlood(t *testing.T) {
	is, v, c, answer := opaque(t)
	ctx := context.Background()
	is.knows("victim-token", answer)
	_, err := v.Verify(ctx, "victim-token", resource)
	require.NoError(t, err)
	n := 0
	flood := func(k int) {
		for range k {
			_, _ = v.Verify(ctx, fmt.Sprint("junk-", n), resource)
			n++
		}
	}
	flood(IntrospectionBurst * 2) // the rate is spent
	c.advance(CacheFor)           // the victim's token is no longer remembered as valid
	flood(IntrospectionBurst)
	_, err = v.Verify(ctx, "victim-token", resource)
	require.NoError(t, err, "a token found valid before is asked about again without waiting for the rate")
}

func TestOddAnswersAreNotRememberedAndOddTokensAreAskedAbout(t *testing.T) {
	is, v, c, answer := opaque(t)
	ctx := context.Background()
	with := func(k string, val any) map[string]any { return withMember(answer, k, val) }
	// An answer that cannot be read is not remembered as a refusal.
	is.knows("odd", with("exp", "soon"))
	_, err := v.Verify(ctx, "odd", resource)
	assert.Equal(t, IssuerUnavailable, reason(t, err))
	is.knows("odd", answer)
	_, err = v.Verify(ctx, "odd", resource)
	require.NoError(t, err, "the fixed answer is read")
	// Nor one not valid yet.
	is.knows("early", with("nbf", c.now.Add(31*time.Second).Unix()))
	_, err = v.Verify(ctx, "early", resource)
	assert.Equal(t, NotYetValid, reason(t, err))
	c.advance(2 * time.Second)
	_, err = v.Verify(ctx, "early", resource)
	require.NoError(t, err)
	// An inactive answer is inactive, whatever else it holds.
	is.knows("gone", map[string]any{"active": false, "exp": "x", "aud": 7})
	_, err = v.Verify(ctx, "gone", resource)
	assert.Equal(t, Inactive, reason(t, err))
	// A token_type that is not a string is not a bearer's.
	is.knows("typed", with("token_type", 7))
	_, err = v.Verify(ctx, "typed", resource)
	assert.Equal(t, Malformed, reason(t, err))
	// A PASETO-like token with two dots is opaque, and introspected.
	is.knows("v4.local.abcDEF123", answer)
	_, err = v.Verify(ctx, "v4.local.abcDEF123", resource)
	require.NoError(t, err)
}

func TestIntrospectionCredentialsThatComeOutEmptyRefuseTheConfig(t *testing.T) {
	t.Setenv("CADDY_MCP_TEST_SET", "s3cret")
	cfg := &Config{Issuers: []IssuerConfig{{URL: "https://a.example", Introspection: &IntrospectionConfig{ClientID: "gw", ClientSecret: "{env.CADDY_MCP_TEST_SET}"}}}}
	require.NoError(t, cfg.Validate())
	require.NoError(t, cfg.Resolve())
	cfg.Issuers[0].Introspection.ClientSecret = "{env.CADDY_MCP_TEST_UNSET}"
	require.NoError(t, cfg.Validate(), "known only at start")
	assert.ErrorContains(t, cfg.Resolve(), "comes out empty")
}
