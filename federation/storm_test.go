package federation

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/feature"
)

// A storm of list_changed costs the servers one listing every minRelist
// at most, however many calls are routed meanwhile.
func TestAStormOfListChangedIsListedOnceASecondAtMost(t *testing.T) {
	var lists atomic.Int32
	s := testServer("s", answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
		lists.Add(1)
		return writeRPC(w, req.ID, `{"tools":[{"name":"t"}],"prompts":[]}`)
	}), nil)
	f := testFederation(s)
	now := time.Unix(1_800_000_000, 0)
	f.now = func() time.Time { return now }
	x := &feature.Exchange{Request: httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))}
	f.catalog(x, nil, false)
	assert.EqualValues(t, 2, lists.Load(), "tools and prompts, once")

	for range 1000 {
		f.changed.Add(1) // a list_changed
		f.catalog(x, nil, false)
	}
	assert.EqualValues(t, 2, lists.Load(), "not again within minRelist")
	now = now.Add(minRelist + time.Millisecond)
	for range 1000 {
		f.changed.Add(1)
		f.catalog(x, nil, false)
	}
	assert.EqualValues(t, 4, lists.Load(), "once more after minRelist")
}
