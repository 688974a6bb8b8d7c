package federation

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The gateway's own requests to a server each have an id of their own: a
// server refuses two requests of one session in flight under one id, and
// the tools and the prompts are listed at once.
func TestTheGatewaysOwnRequestsNeverShareAnID(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	s := testServer("s", answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
		mu.Lock()
		seen[string(req.ID)]++
		mu.Unlock()
		return writeRPC(w, req.ID, `{"tools":[],"prompts":[]}`)
	}), nil)
	f := testFederation(s)
	from := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	var wg sync.WaitGroup
	for range 8 {
		for _, k := range []*kind{toolsList, promptsList} {
			wg.Go(func() { f.listAll(context.Background(), from, nil, k) })
		}
	}
	wg.Wait()
	assert.Len(t, seen, 16)
	for id, n := range seen {
		assert.Equal(t, 1, n, id)
	}
}
