package validate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// references counts the uses of the process's catalog.
func references() int {
	n, _ := catalogs.References(catalogKey)
	return n
}

// The features of a handler share one learner, plugged once; every
// handler's learner reads the process's one catalog, which goes with the
// last that uses it.
func TestAHandlersFeaturesShareOneLearnerAndTheProcessOneCatalog(t *testing.T) {
	before := references()
	config := new(featuretest.Shared)
	a, b := &featuretest.Host{Config: config}, &featuretest.Host{Config: config}
	fa, err := Shared(a)
	require.NoError(t, err)
	again, err := Shared(a)
	require.NoError(t, err)
	assert.Same(t, fa, again, "made once per handler")
	require.Len(t, a.Plugins(), 1, "and plugged once")
	fb, err := Shared(b)
	require.NoError(t, err)
	assert.NotSame(t, fa, fb)
	assert.Same(t, fa.catalog, fb.catalog, "one catalog for the process")
	assert.Equal(t, before+2, references())

	a.Close()
	assert.Equal(t, before+1, references())
	b.Close()
	assert.Equal(t, before, references())
}

// The catalog is bounded by the largest max_catalog_size of the config,
// whichever handler gives it; a config that gives none has the default.
func TestTheCatalogIsBoundedByTheLargestSizeOfTheConfig(t *testing.T) {
	config := new(featuretest.Shared)
	hosts := []*featuretest.Host{{Config: config}, {Config: config}}
	for i, size := range []int64{0, 1 << 20} {
		f, err := Shared(hosts[i])
		require.NoError(t, err)
		t.Cleanup(hosts[i].Close)
		m := &Module{MaxCatalogSize: size}
		_, err = m.Parts(hosts[i])
		require.NoError(t, err)
		_, err = f.Parts(hosts[i])
		require.NoError(t, err)
	}
	f, _ := Shared(hosts[0])
	assert.EqualValues(t, 1<<20, f.catalog.Stats().MaxBytes)

	fresh := &featuretest.Host{}
	t.Cleanup(fresh.Close)
	g, err := Shared(fresh)
	require.NoError(t, err)
	_, err = g.Parts(fresh)
	require.NoError(t, err)
	assert.EqualValues(t, toolschema.DefaultMaxBytes, g.catalog.Stats().MaxBytes, "a reload to a config without one")
}

// The learner checks calls only when a feature asks it to: validate (the
// arguments), or a policy that hides tools (a tool a complete list lacks).
func TestTheLearnerChecksCallsOnlyWhenAFeatureAsks(t *testing.T) {
	for name, c := range map[string]struct {
		configure    func(f *Feature)
		check, reads bool
	}{
		"learning only":       {func(*Feature) {}, false, false},
		"a policy that hides": {func(f *Feature) { f.RefuseAbsent(func(string) bool { return true }) }, true, false},
		"validate":            {func(f *Feature) { f.CheckArguments(0) }, true, true},
	} {
		t.Run(name, func(t *testing.T) {
			h := &featuretest.Host{}
			t.Cleanup(h.Close)
			f, err := Shared(h)
			require.NoError(t, err)
			c.configure(f)
			parts, err := f.Parts(h)
			require.NoError(t, err)
			assert.NotNil(t, parts.Responder, "it always learns")
			assert.Equal(t, c.check, parts.Check != nil)
			assert.Equal(t, c.reads, f.ReadsWholeBody())
			assert.Equal(t, Order, parts.Order)
		})
	}
}
