package featurefile

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	Register("test_word", Subdirective{
		Read:  func(*caddyfile.Dispenser, *Adaptation) error { return nil },
		Words: map[string][]string{"test_word": {"alpha", "beta"}},
	})
}

func TestASubdirectiveIsRegisteredOnce(t *testing.T) {
	_, ok := Lookup("test_word")
	assert.True(t, ok)
	assert.Contains(t, Names(), "test_word")
	assert.Panics(t, func() { Register("test_word", Subdirective{}) })
}

// Two blocks of one Caddyfile that give one shared name two settings are
// refused, naming both places; the same settings twice are one state.
func TestANameSharedAcrossBlocksMustAgree(t *testing.T) {
	state := make(map[string]any)
	warn := func(caddyconfig.Warning) {}
	first, second := NewAdaptation(state, warn), NewAdaptation(state, warn)
	require.NoError(t, first.Share("rate_limit", "a", "Caddyfile:3", map[string]string{"rate": "1/s"}))
	require.NoError(t, second.Share("rate_limit", "a", "Caddyfile:9", map[string]string{"rate": "1/s"}))
	err := second.Share("rate_limit", "a", "Caddyfile:12", map[string]string{"rate": "2/s"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `rate_limit "a" is configured at Caddyfile:3 and, differently, at Caddyfile:12`)
	assert.NoError(t, NewAdaptation(nil, warn).Share("rate_limit", "a", "x:1", "other"), "without state, a block is alone")
}

func TestEachFeatureIsOneValueWrittenAsJSON(t *testing.T) {
	a := NewAdaptation(nil, func(caddyconfig.Warning) {})
	type cfg struct {
		N int `json:"n"`
	}
	a.Feature("f", func() any { return &cfg{} }).(*cfg).N++
	a.Feature("f", func() any { return &cfg{} }).(*cfg).N++
	got, err := a.Features()
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":2}`, string(got["f"]))
}

func TestAnUnknownWordIsAnsweredWithTheNearestKnownAtItsLine(t *testing.T) {
	d := caddyfile.NewTestDispenser("test_word {\n\talphx 1\n}")
	d.Next()
	d.NextBlock(0)
	err := Unrecognized(d, "test_word", d.Val())
	assert.EqualError(t, err, `unrecognized test_word subdirective "alphx": did you mean "alpha"?, at Testfile:2`)
	assert.EqualError(t, Unrecognized(d, "test_word", "zzz"), `unrecognized test_word subdirective "zzz", at Testfile:2`)
}

func TestValuesAreCheckedAtTheirLine(t *testing.T) {
	for input, want := range map[string]string{
		"max 0":             `max "0": want a positive whole number, at Testfile:1`,
		"max":               `max needs a value, at Testfile:1`,
		"max 1 2":           `max takes one value, got another: "2", at Testfile:1`,
		"size 0":            `size "0": want a size such as 4MiB or 65536, at Testfile:1`,
		"after -1s":         `after "-1s": want a positive duration such as 30s, at Testfile:1`,
		"key {clientip}":    `did you mean {client_ip}?`,
		"methods tools/cal": `did you mean "tools/call"?`,
	} {
		d := caddyfile.NewTestDispenser(input)
		d.Next()
		var err error
		switch d.Val() {
		case "max":
			_, err = PositiveInt(d)
		case "size":
			_, err = Size(d)
		case "after":
			_, err = PositiveDuration(d)
		case "key":
			_, err = KeyTemplate(d, "test")
		case "methods":
			_, err = Methods(d, "test")
		}
		require.Error(t, err, input)
		assert.Contains(t, err.Error(), want, input)
	}
}
