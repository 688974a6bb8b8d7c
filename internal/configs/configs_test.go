package configs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closer counts its closes.
type closer struct{ closed int }

func (c *closer) Close() error { c.closed++; return nil }

func TestAConfigsLoadGoesWithItsLastHandler(t *testing.T) {
	var r Registry[*fake]
	a, b := r.Join("old"), r.Join("old")
	require.Same(t, a, b, "one config, one load")
	fresh := r.Join("new")
	assert.Equal(t, []any{"old", "new"}, r.IDs(), "in the order of their first handler")

	a.Leave()
	assert.Equal(t, []any{"old", "new"}, r.IDs(), "one handler of the old config is left")
	b.Leave()
	assert.Equal(t, []any{"new"}, r.IDs())
	fresh.Leave()
	assert.Empty(t, r.IDs())
	assert.NotSame(t, a, r.Join("old"), "a config loaded afterwards starts anew")
}

func TestTheLiveHandlersAreListedConfigByConfig(t *testing.T) {
	var r Registry[*fake]
	old, fresh := r.Join("old"), r.Join("new")
	h1, h2, h3 := &fake{"1"}, &fake{"2"}, &fake{"3"}
	fresh.AddLive(h3)
	old.AddLive(h1)
	old.AddLive(h2)
	assert.Equal(t, []*fake{h1, h2, h3}, r.Live(), "the old config's first, each in provisioning order")
	old.RemoveLive(h1)
	assert.Equal(t, []*fake{h2, h3}, r.Live())
}

func TestWhatAConfigSharesIsMadeOnceAndClosedWithIt(t *testing.T) {
	var r Registry[*fake]
	a, b := r.Join("c"), r.Join("c")
	c := &closer{}
	made := 0
	make := func() (any, error) { made++; return c, nil }
	v, err := a.Share("k", make)
	require.NoError(t, err)
	w, err := b.Share("k", make)
	require.NoError(t, err)
	assert.True(t, v == w, "the handlers of a config share its value")
	assert.Equal(t, 1, made)

	_, err = a.Share("failing", func() (any, error) { return nil, errors.New("no") })
	require.Error(t, err)
	_, err = a.Share("failing", func() (any, error) { return 1, nil })
	require.NoError(t, err, "a value that failed to be made is made again")

	a.Leave()
	assert.Zero(t, c.closed, "b still uses it")
	b.Leave()
	assert.Equal(t, 1, c.closed, "closed with the config's last handler")
}

func TestHandlersOfAConfigMustAgreeOnAName(t *testing.T) {
	var r Registry[*fake]
	l := r.Join("c")
	defer l.Leave()
	require.NoError(t, l.Declare("guard", "g", "max 1"))
	require.NoError(t, l.Declare("guard", "g", "max 1"), "the same settings")
	require.NoError(t, l.Declare("rate_limit", "g", "max 2"), "another kind's name")
	err := l.Declare("guard", "g", "max 2")
	require.Error(t, err)
	assert.Equal(t, `guard "g" is configured differently by two mcp handlers of this config (max 1, and max 2): handlers that use one name share its state, so they must give it the same settings; rename one of them to keep them apart`, err.Error())

	other := r.Join("other")
	defer other.Leave()
	assert.NoError(t, other.Declare("guard", "g", "max 2"), "another config's are its own")
}

func TestUnnamedGuardsAreNumberedBySettings(t *testing.T) {
	var r Registry[*fake]
	l := r.Join("c")
	defer l.Leave()
	assert.Equal(t, 1, l.Ordinal("max 1"))
	assert.Equal(t, 2, l.Ordinal("max 1"))
	assert.Equal(t, 1, l.Ordinal("max 2"))
	again := r.Join("again")
	defer again.Leave()
	assert.Equal(t, 1, again.Ordinal("max 1"), "each config counts its own")
}
