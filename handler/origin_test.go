package handler

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAllowedOriginsAreCheckedAtLoad(t *testing.T) {
	h := &Handler{AllowedOrigins: []string{"https://app.example.com/path"}}
	ctx, cancel := newCaddyContext()
	defer cancel()
	assert.Error(t, h.Provision(ctx), "an allowed origin that is no origin")
	unload(t, h)
}

func TestAForeignOriginIsRefusedBeforeAnythingElse(t *testing.T) {
	h := provision(t, &Handler{AllowedOrigins: []string{"https://app.example.com"}, FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"origin_first": {Rate: "1/1h"}})})
	u := &upstream{}
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		r := newRequest(method, callOne, header("Origin", "https://evil.example"))
		r.ProtoMajor = 2
		w := serve(t, h, r, u)
		assert.Equal(t, http.StatusForbidden, w.Code, method)
		assert.Empty(t, w.Header().Get("Connection"), "HTTP/2 has no connection to close")
	}
	assert.Zero(t, u.calls)
	requireForwarded(t, u, 1, serve(t, h, post(callOne, header("Origin", "https://app.example.com")), u))
	assert.Contains(t, serve(t, h, post(callOne), u).Body.String(), "RATE_LIMITED", "the one token went to the allowed call: the refused ones took none")
}
