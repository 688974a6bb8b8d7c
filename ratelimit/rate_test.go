package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/ratelimit"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want ratelimit.Rate
	}{
		{"10/s", ratelimit.Rate{Events: 10, Window: time.Second}},
		{"600/m", ratelimit.Rate{Events: 600, Window: time.Minute}},
		{"100/h", ratelimit.Rate{Events: 100, Window: time.Hour}},
		{"600/1m", ratelimit.Rate{Events: 600, Window: time.Minute}},
		{"5/30s", ratelimit.Rate{Events: 5, Window: 30 * time.Second}},
		{"100/1h", ratelimit.Rate{Events: 100, Window: time.Hour}},
		{"1/500ms", ratelimit.Rate{Events: 1, Window: 500 * time.Millisecond}},
		{"3/1h30m", ratelimit.Rate{Events: 3, Window: 90 * time.Minute}},
		{"1/1.5s", ratelimit.Rate{Events: 1, Window: 1500 * time.Millisecond}},
		{"1000/1d", ratelimit.Rate{Events: 1000, Window: 24 * time.Hour}},
		{"1000/d", ratelimit.Rate{Events: 1000, Window: 24 * time.Hour}},
		{"7/1.5d", ratelimit.Rate{Events: 7, Window: 36 * time.Hour}},
		{"7/1d12h", ratelimit.Rate{Events: 7, Window: 36 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ratelimit.ParseRate(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseRateErrorsNameTheBadValue(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", `rate "": want EVENTS/WINDOW`},
		{"10", `rate "10": want EVENTS/WINDOW`},
		{"10/x", `rate "10/x": window: time: invalid duration "x"`},
		{"10/", `rate "10/": window: time: invalid duration ""`},
		{"10/1x", `rate "10/1x": window: time: unknown unit "x"`},
		{"ten/s", `rate "ten/s": events "ten": not a whole number`},
		{"/s", `rate "/s": events "": not a whole number`},
		{"1.5/s", `rate "1.5/s": events "1.5": not a whole number`},
		{"0/s", `rate "0/s": events must be positive`},
		{"-1/s", `rate "-1/s": events must be positive`},
		{"10/0s", `rate "10/0s": window must be positive`},
		{"10/-1s", `rate "10/-1s": window must be positive`},
		{"10/s/s", `rate "10/s/s": window: time: invalid duration "s/s"`},
		{"10/-1d", `rate "10/-1d": window: invalid duration "-1d"`},
		{"10/1e3d", `rate "10/1e3d": window: invalid duration "1e3d"`},
		{"10/999999d", `rate "10/999999d": window: invalid duration "999999d"`},
		{"10/1dx", `rate "10/1dx": window: invalid duration "1dx"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ratelimit.ParseRate(tt.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestRateStringIsCanonicalAndRoundTrips(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"10/s", "10/1s"},
		{"600/m", "600/1m"},
		{"600/60s", "600/1m"},
		{"100/h", "100/1h"},
		{"5/30s", "5/30s"},
		{"5/10s", "5/10s"},
		{"1/500ms", "1/500ms"},
		{"1/1.5s", "1/1.5s"},
		{"2/10m", "2/10m"},
		{"3/1h30m", "3/1h30m"},
		{"3/1h0m30s", "3/1h0m30s"},
		{"7/2h", "7/2h"},
		{"1/1us", "1/1µs"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ratelimit.ParseRate(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, r.String())
			back, err := ratelimit.ParseRate(r.String())
			require.NoError(t, err)
			assert.Equal(t, r, back)
		})
	}
}

func TestLimitValidate(t *testing.T) {
	valid := ratelimit.Limit{Rate: ratelimit.Rate{Events: 10, Window: time.Second}, Burst: 5}
	assert.NoError(t, valid.Validate())

	tests := []struct {
		name string
		lim  ratelimit.Limit
		want string
	}{
		{"no events", ratelimit.Limit{Rate: ratelimit.Rate{Window: time.Second}, Burst: 1}, `rate "0/1s": events and window must be positive`},
		{"no window", ratelimit.Limit{Rate: ratelimit.Rate{Events: 1}, Burst: 1}, `rate "1/0s": events and window must be positive`},
		{"no burst", ratelimit.Limit{Rate: ratelimit.Rate{Events: 1, Window: time.Second}}, `burst 0: must be positive`},
		{"negative burst", ratelimit.Limit{Rate: ratelimit.Rate{Events: 1, Window: time.Second}, Burst: -2}, `burst -2: must be positive`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.lim.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
