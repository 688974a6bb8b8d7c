package guard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// load is one config's declarations, as the handler keeps them.
type load struct{ unnamed map[string]int }

func (*load) Declare(string, string, string) error { return nil }

func (l *load) Ordinal(settings string) int {
	if l.unnamed == nil {
		l.unnamed = map[string]int{}
	}
	l.unnamed[settings]++
	return l.unnamed[settings]
}

// provisioned is a guard with its places, let go when the test ends.
func provisioned(t *testing.T, cfg Config) *Guard {
	t.Helper()
	g, err := New(&cfg, &load{}, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(g.Release)
	return g
}

func call(tool string) string {
	return `{"jsonrpc":"2.0","id":"` + tool + `","method":"tools/call","params":{"name":"` + tool + `"}}`
}

func batch(tools ...string) string {
	calls := make([]string, len(tools))
	for i, tool := range tools {
		calls[i] = call(tool)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

func TestEachCountedMessageTakesAPlaceUntilTheUndo(t *testing.T) {
	tests := []struct {
		name string
		body string
		// places the request holds once admitted.
		places int
	}{
		{"a call", call("a"), 1},
		{"a batch of three calls", batch("a", "b", "c"), 3},
		{"a batch of a call and a list", "[" + call("a") + `,{"jsonrpc":"2.0","id":9,"method":"tools/list"}]`, 1},
		{"a list", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, 0},
		{"a response", `{"jsonrpc":"2.0","id":9,"result":{}}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := provisioned(t, Config{Max: 3, CancelGrace: caddy.Duration(7 * time.Second)})
			u, ref := g.Admit(featuretest.Post(t, tt.body))
			require.Nil(t, ref)
			assert.Equal(t, tt.places, g.Places().Totals().Active)
			if tt.places == 0 {
				assert.Nil(t, u, "nothing taken, nothing to give back")
				return
			}
			assert.Equal(t, 7*time.Second, u.(feature.Lingering).Linger(), "held for cancel_grace after a client that left")
			u.Undo(time.Now(), true)
			assert.Zero(t, g.Places().Totals().Active)
		})
	}
}

func TestARefusalSaysWhoRefusedAndWhy(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		held    map[string]int
		body    string
		message string
		rule    feature.Rule
	}{
		{"every place taken, no queue", Config{Name: "calls", Max: 1}, map[string]int{"": 1}, call("a"),
			"Server busy: 1 call in progress and 0 waiting, the most it takes (1 in progress, 0 waiting)",
			feature.Rule{Kind: "guard", Name: "calls"}},
		{"a batch over max", Config{Max: 2}, nil, batch("a", "b", "c"),
			"Server busy: this batch needs 3 calls at once, and at most 2 calls run at once here, so it can never be admitted",
			feature.Rule{Kind: "guard", Name: "default"}},
		{"a keyed guard names the key", Config{Name: "per_tool", Max: 1, Key: "{http.mcp.tool}"}, map[string]int{"b": 1}, call("b"),
			"Server busy: 1 call in progress and 0 waiting",
			feature.Rule{Kind: "guard", Name: "per_tool", Key: "b", Keyed: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := provisioned(t, tt.cfg)
			for key, n := range tt.held {
				slot, err := g.Places().AcquireNAt(context.Background(), key, time.Now(), n)
				require.NoError(t, err)
				t.Cleanup(slot.Release)
			}
			u, ref := g.Admit(featuretest.Post(t, tt.body))
			assert.Nil(t, u)
			require.NotNil(t, ref)
			assert.False(t, ref.Gone)
			assert.Equal(t, envelope.ServerBusy, ref.Envelope.Code)
			assert.Equal(t, http.StatusServiceUnavailable, ref.Status)
			assert.True(t, strings.HasPrefix(ref.Envelope.Message, tt.message), ref.Envelope.Message)
			assert.Equal(t, tt.rule, ref.By)
			var shed *busy.Shed
			assert.ErrorAs(t, ref.Cause, &shed, "the log says what the guard saw")
		})
	}
}

func TestARefusalUnderOneKeyGivesBackTheOthersPlaces(t *testing.T) {
	g := provisioned(t, Config{Max: 1, Key: "{http.mcp.tool}"})
	slot, err := g.Places().AcquireNAt(context.Background(), "c", time.Now(), 1)
	require.NoError(t, err)
	defer slot.Release()
	_, ref := g.Admit(featuretest.Post(t, batch("a", "b", "c")))
	require.NotNil(t, ref)
	assert.Equal(t, "c", ref.By.Key)
	assert.Equal(t, 1, g.Places().Totals().Active, "a's and b's places came back")
}

func TestAClientThatLeavesTheQueueIsNobodyToAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := provisioned(t, Config{Max: 1, Queue: 1})
		slot, err := g.Places().AcquireNAt(context.Background(), "", time.Now(), 1)
		require.NoError(t, err)
		defer slot.Release()
		x := featuretest.Post(t, call("a"))
		ctx, cancel := context.WithCancel(context.Background())
		x.Request = x.Request.WithContext(ctx)
		time.AfterFunc(time.Second, cancel)
		u, ref := g.Admit(x)
		assert.Nil(t, u)
		require.NotNil(t, ref)
		assert.True(t, ref.Gone)
		assert.ErrorIs(t, ref.Cause, context.Canceled)
		totals := g.Places().Totals()
		assert.Equal(t, 1, totals.Active)
		assert.Zero(t, totals.Queued, "it left the queue")
	})
}

// Entering one place allocates nothing: the places are held in recycled
// state.
func TestEnteringAllocatesNothing(t *testing.T) {
	g := provisioned(t, Config{Max: 4})
	x := featuretest.Post(t, call("a"))
	allocs := testing.AllocsPerRun(1000, func() {
		u, ref := g.Admit(x)
		if ref != nil {
			t.Fatal(ref.Envelope.Message)
		}
		u.Undo(x.Start, true)
	})
	assert.Zero(t, allocs)
}
