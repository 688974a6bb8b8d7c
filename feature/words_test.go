package feature

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestInSecondsRoundsUpToWholeSecondsAtLeastOne(t *testing.T) {
	tests := []struct {
		d    time.Duration
		secs int64
		in   string
	}{
		{-time.Second, 1, "1 second"},
		{0, 1, "1 second"},
		{time.Nanosecond, 1, "1 second"},
		{time.Second, 1, "1 second"},
		{time.Second + time.Millisecond, 2, "2 seconds"},
		{20 * time.Second, 20, "20 seconds"},
		{90 * time.Minute, 5400, "5400 seconds"},
	}
	for _, tt := range tests {
		secs, in := InSeconds(tt.d)
		assert.Equal(t, tt.secs, secs, tt.d.String())
		assert.Equal(t, tt.in, in, tt.d.String())
	}
}

func TestCountOfNamesWhatALimitCounts(t *testing.T) {
	tests := []struct {
		n       int
		methods []string
		want    string
	}{
		{0, []string{"tools/call"}, "0 calls"},
		{1, []string{"tools/call"}, "1 call"},
		{3, []string{"tools/call"}, "3 calls"},
		{1, []string{"tools/list"}, "1 request"},
		{2, []string{"tools/call", "tools/list"}, "2 requests"},
		{2, nil, "2 requests"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, CountOf(tt.n, tt.methods))
	}
	assert.Equal(t, "1 second", Plural(1, "second"))
	assert.Equal(t, "0 seconds", Plural(0, "second"))
	assert.Equal(t, "-1 seconds", Plural(-1, "second"))
}

func TestFormatWindowWritesDurationsAsAPersonWould(t *testing.T) {
	tests := map[time.Duration]string{
		time.Second:             "1s",
		30 * time.Second:        "30s",
		time.Minute:             "1m",
		90 * time.Minute:        "90m",
		2 * time.Hour:           "2h",
		24 * time.Hour:          "24h",
		1500 * time.Millisecond: "1.5s",
		250 * time.Millisecond:  "250ms",
		61 * time.Second:        "61s",
	}
	for d, want := range tests {
		assert.Equal(t, want, Window(d), d.String())
	}
}
