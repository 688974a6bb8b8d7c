package oauth

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groups is a claim as an issuer that lists a user's groups writes it
// (Entra ID's "groups"): n object ids, some 39 bytes each.
func groups(seed, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", seed, i)
	}
	return ids
}

// A token far over a few KiB (an Entra ID token listing a user's groups)
// is checked once, and then answered from the cache as a short one is:
// its signature is not checked again on every request.
func TestALargeValidTokenIsCheckedOnceThenRemembered(t *testing.T) {
	g, is, claims := gateFor(t, &Config{Resource: resource})
	claims["groups"] = groups(1, 280)
	token := is.sign(t, "k1", claims)
	require.Greater(t, len(token), 14<<10)
	x := exchange("Bearer " + token)
	_, ref := g.Admit(x)
	require.Nil(t, ref)
	first := x.Principal
	for range 3 {
		_, ref = g.Admit(x)
		require.Nil(t, ref)
		assert.Same(t, first, x.Principal, "the principal of the one check")
	}
	assert.Equal(t, 1, g.Status().Remembered)
}

// Many large tokens, each valid and new: the cache keeps them within
// MaxCachedBytes, and what it counts is at least what it holds, so the
// memory it keeps stays within that bound whatever the tokens hold.
func TestLargeTokensAreRememberedWithinTheCachesBytes(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	claims, err := json.Marshal(map[string]any{
		"iss": "https://auth.example.com", "aud": resource, "scope": "tools:read tools:call",
		"exp": now.Add(time.Hour).Unix(), "groups": groups(0, 280),
	})
	require.NoError(t, err)
	var decoded map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(claims, &decoded))
	// Principals as a check makes them: each claim a copy of its value,
	// as decoding the token's payload makes it.
	principal := func(i int) *Principal {
		all := make(map[string]json.RawMessage, len(decoded)+1)
		for name, value := range decoded {
			all[name] = append(json.RawMessage(nil), value...)
		}
		all["sub"] = json.RawMessage(fmt.Sprintf("%q", fmt.Sprint("user-", i)))
		p := &Principal{Issuer: "https://auth.example.com", Subject: fmt.Sprint("user-", i), Scopes: scopes(all), Expiry: now.Add(time.Hour), Claims: all}
		return p.complete()
	}
	var c tokenCache
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	size := principal(0).held
	n := 2 * MaxCachedBytes / size
	for i := range n {
		c.put(cacheKey(fmt.Sprint("token-", i), resource), cached{p: principal(i), until: now.Add(CacheFor)}, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int(after.HeapAlloc) - int(before.HeapAlloc)
	t.Logf("%d tokens of %d bytes of claims: %d remembered, %d bytes counted, %d held", n, size, c.len(), c.bytes, held)

	assert.LessOrEqual(t, c.bytes, MaxCachedBytes)
	assert.Less(t, c.len(), MaxCached, "held to its bytes before its count")
	assert.Greater(t, c.len(), n/3, "and full to them")
	assert.LessOrEqual(t, held, c.bytes, "what is counted covers what is held")
	_, ok := c.get(cacheKey(fmt.Sprint("token-", n-1), resource), now)
	assert.True(t, ok, "the newest is kept")
	runtime.KeepAlive(&c)
}
