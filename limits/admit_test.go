package limits

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// provisioned is the limit name with its buckets, let go when the test
// ends.
func provisioned(t *testing.T, name string, cfg Config) *Limit {
	t.Helper()
	l, err := New(name, &cfg, nil, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(l.Release)
	return l
}

const (
	callA = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`
	callB = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b"}}`
	list  = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
)

func TestAdmitCountsRepeatedKeysOnce(t *testing.T) {
	l := provisioned(t, "per_tool_repeat", Config{Rate: "10/1h", Key: "{http.mcp.tool}"})
	ls := Limits{l}
	x := featuretest.Post(t, "["+strings.Repeat(callA+",", 9)+callB+","+list+"]")
	u, ref := ls.Admit(x)
	require.Nil(t, ref)
	require.NotNil(t, u)
	taken := u.(*taking).costs.reqs
	require.Len(t, taken, 2, "one request per key")
	assert.Equal(t, "a", taken[0].Key)
	assert.Equal(t, 9, taken[0].Cost)
	assert.Equal(t, "b", taken[1].Key)
	assert.Equal(t, 1, taken[1].Cost)

	_, ref = ls.Admit(x)
	require.NotNil(t, ref, "a has 1 token left, the batch needs 9")
	assert.Equal(t, feature.Rule{Kind: "limit", Name: "per_tool_repeat", Key: "a", Keyed: true}, ref.By)
	assert.Equal(t, envelope.RateLimited, ref.Envelope.Code)
	assert.Equal(t, http.StatusTooManyRequests, ref.Status)

	u.Undo(time.Now(), false)
	u, ref = ls.Admit(x)
	require.Nil(t, ref, "the refund made room for the batch again")
	u.Undo(time.Now(), true)
}

func TestUndoGivesTokensBackOnlyForARequestThatDidNotRun(t *testing.T) {
	tests := []struct {
		name string
		ran  bool
		// admitted: a second call is admitted after the first's Undo.
		admitted bool
	}{
		{"a request that ran spent its token", true, false},
		{"a request that did not run gets it back", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := Limits{provisioned(t, "undo_"+strings.ReplaceAll(tt.name, " ", "_"), Config{Rate: "1/1h", Key: "all"})}
			u, ref := ls.Admit(featuretest.Post(t, callA))
			require.Nil(t, ref)
			u.Undo(time.Now(), tt.ran)
			u, ref = ls.Admit(featuretest.Post(t, callA))
			assert.Equal(t, tt.admitted, ref == nil)
			if u != nil {
				u.Undo(time.Now(), true)
			}
		})
	}
}

func TestAdmitTakesNothingForWhatNoLimitCounts(t *testing.T) {
	ls := Limits{provisioned(t, "calls_only", Config{Rate: "1/1h", Key: "all"})}
	for range 3 {
		u, ref := ls.Admit(featuretest.Post(t, list))
		assert.Nil(t, ref)
		assert.Nil(t, u, "nothing taken, nothing to give back")
	}
	get := featuretest.Get(t)
	u, ref := ls.Admit(get)
	assert.Nil(t, u)
	assert.Nil(t, ref)
}

func TestARefusalSaysWhyInTheModelsWords(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		body   string
		code   envelope.Code
		status int
		says   string
	}{
		{"a bucket run dry", Config{Rate: "1/1h", Key: "all"}, callA, envelope.RateLimited, http.StatusTooManyRequests, "Rate limit exceeded: 1 call per 1h for all clients"},
		{"a batch over the burst", Config{Rate: "2/1h", Key: "all"}, "[" + callA + "," + callB + "," + callA + "]", envelope.RateLimited, http.StatusTooManyRequests, "this batch counts 3 calls against the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := Limits{provisioned(t, "words_"+strings.ReplaceAll(tt.name, " ", "_"), tt.cfg)}
			if !strings.HasPrefix(tt.body, "[") {
				u, ref := ls.Admit(featuretest.Post(t, tt.body))
				require.Nil(t, ref)
				u.Undo(time.Now(), true)
			}
			u, ref := ls.Admit(featuretest.Post(t, tt.body))
			assert.Nil(t, u)
			require.NotNil(t, ref)
			assert.Equal(t, tt.code, ref.Envelope.Code)
			assert.Equal(t, tt.status, ref.Status)
			assert.Contains(t, ref.Envelope.Message, tt.says)
		})
	}
}

func TestAKeyReadsTheRequestsPlaceholders(t *testing.T) {
	ls := Limits{provisioned(t, "per_client", Config{Rate: "1/1h"})}
	from := func(ip string) *feature.Exchange {
		x := featuretest.Post(t, callA)
		x.Replacer = featuretest.Placeholders{"http.vars.client_ip": ip}
		return x
	}
	u, ref := ls.Admit(from("203.0.113.7"))
	require.Nil(t, ref)
	u.Undo(time.Now(), true)
	_, ref = ls.Admit(from("203.0.113.7"))
	require.NotNil(t, ref)
	assert.Equal(t, "203.0.113.7", ref.By.Key)
	u, ref = ls.Admit(from("198.51.100.1"))
	assert.Nil(t, ref, "another client has its own bucket")
	u.Undo(time.Now(), true)
}

// Admitting a request allocates nothing: the tokens are held in recycled
// state. (A refund that fills a bucket up drops it, and the next take
// makes it anew: the test spends its tokens.)
func TestAdmittingAllocatesNothing(t *testing.T) {
	ls := Limits{provisioned(t, "allocs", Config{Rate: "1000000/1s", Key: "all"})}
	x := featuretest.Post(t, callA)
	allocs := testing.AllocsPerRun(1000, func() {
		u, ref := ls.Admit(x)
		if ref != nil {
			t.Fatal(ref.Envelope.Message)
		}
		u.Undo(x.Start, true)
	})
	assert.Zero(t, allocs)
}

func TestCostsOfManyKeysAreCountedOncePerKey(t *testing.T) {
	a, b := &Limit{name: "a"}, &Limit{name: "b"}
	var c costs
	for i := range 100 {
		c.add(a, fmt.Sprint(i%40))
		c.add(b, "one")
	}
	require.Len(t, c.reqs, 41, "40 keys of a, one of b")
	total := 0
	for i, r := range c.reqs {
		total += r.Cost
		if c.owners[i] == b {
			assert.Equal(t, 100, r.Cost)
		}
	}
	assert.Equal(t, 200, total)
}

// BenchmarkCostsManyKeys adds a batch of 32,000 calls with distinct tool
// names to a {http.mcp.tool}-keyed limit: constant time per message.
func BenchmarkCostsManyKeys(b *testing.B) {
	l := &Limit{name: "per_tool"}
	names := make([]string, 32000)
	for i := range names {
		names[i] = "tool_" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		var c costs
		for _, k := range names {
			c.add(l, k)
		}
	}
}
