package answer

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// requests are tools/call messages with these ids, as a batch holds them.
func requests(ids ...string) []jsonrpc.Message {
	msgs := make([]jsonrpc.Message, len(ids))
	for i, id := range ids {
		msgs[i] = jsonrpc.Message{Kind: jsonrpc.Request, Method: []byte("tools/call"), ID: []byte(id)}
	}
	return msgs
}

func owedIDs(o *owedResponses) []string {
	var ids []string
	for m := range o.all() {
		ids = append(ids, string(m.ID))
	}
	return ids
}

// A response settles the request a client may take it for (see
// jsonrpc.MayAnswer): the same value, or one a client reads as the same.
func TestAResponseSettlesTheRequestAClientMayTakeItFor(t *testing.T) {
	tests := []struct {
		sent, answered string
	}{
		{`7`, `7`},
		{`"café"`, `"caf\u00e9"`},
		{`"caf\u00e9"`, `"café"`},
		{`1e2`, `100`},
		{`1.0`, `1`},
		{`-0`, `0`},
		{`12345678901234567890`, `12345678901234567000`},
		{`"a"`, `"a"`},
		{`null`, `null`},
		{`1`, `"1"`},    // the TypeScript and Python SDKs
		{`"1"`, `1`},    // the TypeScript SDK
		{`1`, `1.5`},    // the Go SDK
		{`10`, `"1_0"`}, // the Python SDK
	}
	for _, tt := range tests {
		t.Run(tt.sent+" answered as "+tt.answered, func(t *testing.T) {
			var o owedResponses
			require.True(t, o.init(requests(tt.sent)))
			o.settle([]byte(tt.answered))
			assert.Zero(t, o.left)
		})
	}
	for _, tt := range []struct{ sent, answered string }{
		{`1`, `2`}, {`"a"`, `"A"`}, {`2`, `1.5`}, {`1`, `"1.5"`},
	} {
		var o owedResponses
		require.True(t, o.init(requests(tt.sent)))
		o.settle([]byte(tt.answered))
		assert.Equal(t, 1, o.left, "%s must not be settled by %s", tt.sent, tt.answered)
	}
}

func TestResponsesSettleABatchInAnyOrder(t *testing.T) {
	msgs := requests(`1`, `"two"`, `3`, `4`)
	msgs = slices.Insert(msgs, 1, jsonrpc.Message{Kind: jsonrpc.Notification, Method: []byte("notifications/progress")})
	var o owedResponses
	require.True(t, o.init(msgs))
	o.settle([]byte(`4`))
	o.settle([]byte(`1`))
	o.settle([]byte(`5`)) // owed by no one
	o.settle([]byte(`1`)) // settled already
	assert.Equal(t, []string{`"two"`, `3`}, owedIDs(&o), "what is still owed, in the order it was sent")
	o.settle([]byte(`"two"`))
	o.settle([]byte(`3e0`))
	assert.Zero(t, o.left)
	assert.Empty(t, owedIDs(&o))
}

func TestRequestsWithOneIDValueAreSettledOneByOne(t *testing.T) {
	// Two ids a float64 cannot tell apart, and the same id twice: each
	// response settles one request, the one with its bytes first.
	var o owedResponses
	require.True(t, o.init(requests(`9007199254740993`, `9007199254740992`, `5`, `5`)))
	o.settle([]byte(`9007199254740992`))
	assert.Equal(t, []string{`9007199254740993`, `5`, `5`}, owedIDs(&o))
	o.settle([]byte(`9007199254740992`))
	o.settle([]byte(`5`))
	assert.Equal(t, []string{`5`}, owedIDs(&o))
}

func TestNothingIsOwedWithoutRequests(t *testing.T) {
	var o owedResponses
	assert.False(t, o.init([]jsonrpc.Message{{Kind: jsonrpc.Notification}, {Kind: jsonrpc.Response, ID: []byte(`1`)}}))
}

func TestLongResponseIDsAreNotCompared(t *testing.T) {
	var o owedResponses
	require.True(t, o.init(requests(`1`)))
	long := "1." + string(make([]byte, maxResponseID))
	o.settle([]byte(long))
	assert.Equal(t, 1, o.left)
}

// BenchmarkSettleReverseOrder settles a batch of 8,000 requests answered in
// reverse order, the case that was quadratic (15 s through the gateway);
// ns/op is per response.
func BenchmarkSettleReverseOrder(b *testing.B) {
	ids := make([]string, 8000)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	msgs := requests(ids...)
	b.ReportAllocs()
	for b.Loop() {
		var o owedResponses
		o.init(msgs)
		for i := len(ids) - 1; i >= 0; i-- {
			o.settle([]byte(ids[i]))
		}
		if o.left != 0 {
			b.Fatal("not all settled")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/response")
}

func TestOneOwedRequestCostsNoAllocation(t *testing.T) {
	// The tracker holding it is allocated once per event-stream answer;
	// owing and settling one response costs nothing more.
	for _, id := range []string{`"req-42"`, `7`, `"3f2c9a4e-6d1b-4c8e-9a57-2b0d8e1f6c43"`} {
		msgs, answer := requests(id), []byte(id)
		o := new(owedResponses)
		allocs := testing.AllocsPerRun(100, func() {
			*o = owedResponses{}
			o.init(msgs)
			o.settle(answer)
			if o.left != 0 {
				t.Fatal("not settled")
			}
		})
		assert.Zero(t, allocs, "id %s", id)
	}
}

// In a batch too, a response settles the request a client may take it
// for, whether its id is an integer or not, and one whose id has the same
// bytes first.
func TestABatchIsSettledAsClientsMatchIDs(t *testing.T) {
	var o owedResponses
	require.True(t, o.init(requests(`1`, `"2"`, `3`, `"x"`, `"1"`)))
	o.settle([]byte(`"1"`)) // the request "1", by its bytes, before the request 1
	assert.Equal(t, []string{`1`, `"2"`, `3`, `"x"`}, owedIDs(&o))
	o.settle([]byte(`1.5`)) // 1, as the Go SDK truncates it
	o.settle([]byte(`2`))   // "2", as the TypeScript SDK reads it by Number
	o.settle([]byte(`3e0`))
	assert.Equal(t, []string{`"x"`}, owedIDs(&o))
	o.settle([]byte(`"\u0078"`))
	assert.Zero(t, o.left)
}
