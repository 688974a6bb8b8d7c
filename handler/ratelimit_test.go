package handler

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/limits"
)

func TestToolGlobsSelectWhichCallsCount(t *testing.T) {
	tests := []struct {
		tools   []string
		tool    string
		counted bool
	}{
		{[]string{"search_*"}, "search_web", true},
		{[]string{"search_*"}, "search_", true},
		{[]string{"search_*"}, "search", false},
		{[]string{"search_*"}, "web_search_x", false},
		{[]string{"*"}, "anything", true},
		{[]string{"*"}, "", true},
		{[]string{"fetch"}, "fetch", true},
		{[]string{"fetch"}, "fetch_all", false},
		{[]string{"fetch"}, "prefetch", false},
		{[]string{"fetch"}, "FETCH", false},
		{[]string{"*_file"}, "read_file", true},
		{[]string{"*_file"}, "read_files", false},
		{[]string{"a*b*c"}, "abc", true},
		{[]string{"a*b*c"}, "axxbyyc", true},
		{[]string{"a*b*c"}, "acb", false},
		{[]string{"a*b*c"}, "abcb", false},
		{[]string{"ab*ba"}, "aba", false},
		{[]string{"read_*", "list_*"}, "list_files", true},
		{[]string{"read_*", "list_*"}, "write_file", false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.tools, ",")+"/"+tt.tool, func(t *testing.T) {
			h := limited(t, RateLimit{Rate: "1/1h", Tools: tt.tools})
			u := &upstream{}
			requireForwarded(t, u, 1, serve(t, h, post(toolsCall(`1`, tt.tool)), u))
			w := serve(t, h, post(toolsCall(`2`, tt.tool)), u)
			if tt.counted {
				assert.Equal(t, 1, u.calls, "%q matches %q: the second call is refused", tt.tool, tt.tools)
				assert.Equal(t, "3600", w.Header().Get("Retry-After"))
			} else {
				assert.Equal(t, 2, u.calls, "%q does not match %q: the limit does not count it", tt.tool, tt.tools)
			}
		})
	}
}

func TestToolsNarrowOnlyToolsCallNotOtherMethods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := limited(t, RateLimit{Rate: "1/1h", Methods: []string{"tools/call", "prompts/get"}, Tools: []string{"search_*"}})
		u := &upstream{}
		// prompts/get has a params.name too, but tools does not apply to it:
		// every prompts/get counts.
		prompt := `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"other"}}`
		requireForwarded(t, u, 1, serve(t, h, post(prompt), u))
		w := serve(t, h, post(prompt), u)
		assert.Equal(t, 1, u.calls, "the second prompts/get is refused: %s", w.Body)
		// A tools/call of a tool outside the globs is not counted.
		time.Sleep(time.Hour)
		requireForwarded(t, u, 2, serve(t, h, post(toolsCall(`2`, "delete")), u))
		requireForwarded(t, u, 3, serve(t, h, post(toolsCall(`3`, "delete")), u))
	})
}

func TestMethodsSelectWhichMessagesCount(t *testing.T) {
	tests := []struct {
		name    string
		methods []string
		body    string
		counted bool
	}{
		{"tools/call by default", nil, toolsCall(`1`, "search"), true},
		{"only tools/call by default", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"listed method", []string{"tools/list", "resources/read"}, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`, true},
		{"unlisted method", []string{"tools/list", "resources/read"}, toolsCall(`1`, "search"), false},
		{"methods match exactly", []string{"tools/list"}, `{"jsonrpc":"2.0","id":1,"method":"Tools/List"}`, false},
		{"escaped method in the body", []string{"tools/list"}, `{"jsonrpc":"2.0","id":1,"method":"tools\/list"}`, true},
		{"notification", []string{"notifications/progress"}, `{"jsonrpc":"2.0","method":"notifications/progress"}`, true},
		{"client response never counts", []string{"tools/call"}, `{"jsonrpc":"2.0","id":1,"result":{}}`, false},
		{"message with a method that is not a string", []string{"tools/call"}, `{"jsonrpc":"2.0","id":1,"method":["tools/call"]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := limited(t, RateLimit{Rate: "1/1h", Methods: tt.methods})
			u := &upstream{}
			requireForwarded(t, u, 1, serve(t, h, post(tt.body), u))
			w := serve(t, h, post(tt.body), u)
			if tt.counted {
				assert.Equal(t, 1, u.calls, "refused: %s", w.Body)
			} else {
				requireForwarded(t, u, 2, w)
			}
		})
	}
}

func TestOneBucketPerKeyAcrossMethods(t *testing.T) {
	h := limited(t, RateLimit{Rate: "1/1h", Methods: []string{"tools/list", "resources/list"}})
	u := &upstream{}
	requireForwarded(t, u, 1, serve(t, h, post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), u))
	w := serve(t, h, post(`{"jsonrpc":"2.0","id":2,"method":"resources/list"}`), u)
	assert.Equal(t, 1, u.calls)
	assert.Equal(t, http.StatusOK, w.Code)
}

func TestReloadKeepsBucketsAndAppliesTheNewRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const name = "reload_shared"
		old := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{name: {Rate: "1/1h"}})})
		u := &upstream{}
		requireForwarded(t, u, 1, serve(t, old, post(toolsCall(`1`, "search")), u))

		// A reload provisions the new config before it cleans up the old one.
		updated := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{name: {Rate: "1/10s"}})})
		assert.Equal(t, 2, limits.Holders(name, limits.DefaultKey), "both configs hold the buckets")
		unload(t, old)

		w := serve(t, updated, post(toolsCall(`2`, "search")), u)
		assert.Equal(t, 1, u.calls, "the bucket emptied before the reload is still empty")
		assert.Equal(t, "10", w.Header().Get("Retry-After"), "and it refills at the new rate")

		time.Sleep(10 * time.Second)
		requireForwarded(t, u, 2, serve(t, updated, post(toolsCall(`3`, "search")), u))

		unload(t, updated)
		assert.Zero(t, limits.Holders(name, limits.DefaultKey), "the buckets go with the last config that used them")
	})
}

func TestReloadWithAnotherKeyStartsAfresh(t *testing.T) {
	const name = "reload_rekeyed"
	old := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{name: {Rate: "1/1h"}})})
	u := &upstream{}
	requireForwarded(t, u, 1, serve(t, old, post(toolsCall(`1`, "search")), u))

	rekeyed := provision(t, &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{name: {Rate: "1/1h", Key: "{http.mcp.tool}"}})})
	unload(t, old)
	requireForwarded(t, u, 2, serve(t, rekeyed, post(toolsCall(`2`, "search")), u))
}

func TestProvisionRefusesABadLimitAndReleasesTheOthers(t *testing.T) {
	tests := map[string]*RateLimit{
		"no rate":        {},
		"bad rate":       {Rate: "ten per second"},
		"zero events":    {Rate: "0/s"},
		"negative burst": {Rate: "1/s", Burst: -1},
		"no settings":    nil,
	}
	for name, bad := range tests {
		t.Run(name, func(t *testing.T) {
			h := &Handler{FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"a_good": {Rate: "1/s"}, "b_bad": bad})}
			ctx, cancel := newCaddyContext()
			defer cancel()
			err := h.Provision(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `rate_limit "b_bad"`, "the error names the limit")
			// Caddy cleans up a module whose Provision failed.
			unload(t, h)
			assert.Zero(t, limits.Holders("a_good", limits.DefaultKey), "a failed Provision holds no buckets once cleaned up")
		})
	}
}

func TestCaddyfileShorthandsInAJSONKeyMeanTheSame(t *testing.T) {
	h := limited(t, RateLimit{Rate: "1/1h", Key: "{client_ip}:{header.Authorization}"})
	require.Len(t, h.admitters, 1)
	ls := h.admitters[0].(limits.Limits)
	require.Len(t, ls, 1)
	assert.Equal(t, "{http.vars.client_ip}:{http.request.header.Authorization}", ls[0].Key().Text)
}

func TestKeysBeyondMaxKeysShareOneOverflowBucket(t *testing.T) {
	h := limited(t, RateLimit{Rate: "1/1h", MaxKeys: 1})
	u := &upstream{}
	call := toolsCall(`1`, "search")
	requireForwarded(t, u, 1, serve(t, h, post(call, fromClient("192.0.2.1")), u))
	// The cap is reached: the next new client gets the overflow bucket's
	// token, and the one after finds it empty, as if they were one client.
	requireForwarded(t, u, 2, serve(t, h, post(call, fromClient("192.0.2.2")), u))
	w := serve(t, h, post(call, fromClient("192.0.2.3")), u)
	assert.Equal(t, 2, u.calls, "refused: %s", w.Body)
	assert.Contains(t, w.Body.String(), "RATE_LIMITED")
}
