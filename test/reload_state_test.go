package test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// What a config owns is listed until it is cleaned up, and starts afresh
// with each reload.

func init() {
	caddy.RegisterModule(holdProvision{})
	httpcaddyfile.RegisterHandlerDirective("hold_provision", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		h.Next()
		return holdProvision{}, nil
	})
}

// holdProvision is a handler whose Provision waits, while provisionHeld
// holds a hold, until the test releases it: a reload stopped half way,
// once the handlers before it in its route are provisioned and before the
// old config is cleaned up.
type holdProvision struct{}

// provisionHold is a Provision held: reached is told when one waits, and
// release lets it go on.
type provisionHold struct{ reached, release chan struct{} }

var provisionHeld atomic.Pointer[provisionHold]

func (holdProvision) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.hold_provision", New: func() caddy.Module { return new(holdProvision) }}
}

func (holdProvision) Provision(caddy.Context) error {
	if h := provisionHeld.Swap(nil); h != nil {
		close(h.reached)
		<-h.release
	}
	return nil
}

func (holdProvision) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// guardsOf are the guard names /mcp/status lists, in its order.
func guardsOf(s gatewayStatus) []string {
	var names []string
	for _, h := range s.Handlers {
		if h.Features.Concurrency != nil {
			names = append(names, h.Features.Concurrency.Name)
		}
	}
	return names
}

func TestDuringAReloadTheStatusListsTheOldAndTheNewConfigsHandlers(t *testing.T) {
	up := startUpstream(t)
	site := func(guard string) string {
		return fmt.Sprintf("route {\n\tmcp {\n\t\tconcurrency %s {\n\t\t\tmax 1\n\t\t}\n\t}\n\thold_provision\n\treverse_proxy %s\n}", guard, up.addr)
	}
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: site("status_old")})
	_, status, err := getStatus(g.AdminURL)
	require.NoError(t, err)
	require.Equal(t, []string{"status_old"}, guardsOf(status))

	hold := &provisionHold{reached: make(chan struct{}), release: make(chan struct{})}
	provisionHeld.Store(hold)
	t.Cleanup(func() { provisionHeld.Store(nil) })
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		g.Reload(t, site("status_new"))
	}()
	<-hold.reached
	_, status, err = getStatus(g.AdminURL)
	if !assert.NoError(t, err) || !assert.Equal(t, []string{"status_old", "status_new"}, guardsOf(status), "the old config's, then the new one's") {
		t.Logf("%+v", status)
	}
	close(hold.release)
	<-reloaded

	_, status, err = getStatus(g.AdminURL)
	require.NoError(t, err)
	assert.Equal(t, []string{"status_new"}, guardsOf(status), "the old config's handler went with it")
}

func TestAReloadStartsAFreshSetOfToolNamesInTheBudgetsMetric(t *testing.T) {
	up := startUpstream(t)
	site := func(retry int) string {
		return fmt.Sprintf("mcp {\n\tresults {\n\t\tmax 10\n\t}\n\tupstream_retry_after %ds\n}\nreverse_proxy %s", retry, up.addr)
	}
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: site(30)})
	endpoint := g.URL + "/mcp"
	call := func(tool string) {
		t.Helper()
		_, body := post(t, endpoint, wire.ToolCall("1", tool))
		require.Contains(t, string(body), "RESULT_TOO_LARGE", tool)
	}
	// The series outlive configs, and so runs of the test: each run's
	// names are its own.
	name := func(tool string) string { return fmt.Sprintf("fresh%d_%s", freshRuns.Load(), tool) }
	freshRuns.Add(1)
	refused := func(tool string) float64 {
		return mcpMetrics(t, g.AdminURL)[fmt.Sprintf(`caddy_mcp_results_over_budget_total{action="refused",tool=%q}`, tool)]
	}
	// A new config's set is empty, whatever the tests before this one
	// called: the first 100 names are its own.
	for i := range 100 {
		call(name(fmt.Sprint(i)))
	}
	other := refused("_OTHER")
	call(name("late"))
	assert.Equal(t, other+1, refused("_OTHER"), "the 101st name of a config")
	assert.Zero(t, refused(name("late")))

	g.Reload(t, site(31))
	// Once the old config is cleaned up, the series of the names only it
	// labelled are deleted: the series stay bounded however often the
	// config is reloaded.
	require.Eventually(t, func() bool { return refused(name("99")) == 0 }, 10*time.Second, 10*time.Millisecond, "the old config's series go with it")
	call(name("late"))
	call(name("0"))
	assert.Equal(t, 1.0, refused(name("late")), "named by the new config's set")
	assert.Equal(t, 1.0, refused(name("0")), "counted anew by the new config's set")
}

// freshRuns counts the runs of TestAReloadStartsAFreshSetOfToolNamesInTheBudgetsMetric.
var freshRuns atomic.Int64
