package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// mcpMetrics scrapes the admin API's /metrics and returns the caddy_mcp_*
// series (see series).
func mcpMetrics(t *testing.T, adminURL string) map[string]float64 {
	t.Helper()
	fams, err := scrape(adminURL, "caddy_mcp_")
	require.NoError(t, err)
	return series(fams)
}

// scrape reads the admin API's /metrics, in whatever exposition format it
// answers with, and returns the families whose name starts with prefix.
func scrape(adminURL, prefix string) (map[string]*dto.MetricFamily, error) {
	// The admin API is replaced on every reload: a request the old one
	// closed unanswered is sent again.
	resp, err := mcptest.ResendingClient().Get(adminURL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	fams := make(map[string]*dto.MetricFamily)
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if err == io.EOF {
			return fams, nil
		}
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(mf.GetName(), prefix) {
			fams[mf.GetName()] = &mf
		}
	}
}

// gaugesReach polls /metrics until every series in want has its value.
func gaugesReach(t *testing.T, adminURL string, want map[string]float64) {
	t.Helper()
	var (
		mu   sync.Mutex
		last map[string]float64
	)
	ok := assert.Eventually(t, func() bool {
		fams, err := scrape(adminURL, "caddy_mcp_")
		if err != nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		last = series(fams)
		for k, v := range want {
			if got, ok := last[k]; !ok || got != v {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	if !ok {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the gauges did not reach %v; last scrape: %v", want, last)
	}
}

// series flattens families into one value per series, named like the
// exposition format writes it: name{label="value",...}, labels sorted. A
// histogram gives its sample count, as name_count{...}.
func series(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := make(map[string]float64)
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			ls := "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[name+ls] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+ls] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+ls] = float64(m.GetHistogram().GetSampleCount())
			default:
				out[name+ls] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

// delta is after minus before for every series that changed; a series
// absent before counts from 0.
func delta(before, after map[string]float64) map[string]float64 {
	out := make(map[string]float64)
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// jsonLines reads a file of JSON log lines (Caddy's format json); a missing
// file has none.
func jsonLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []map[string]any
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "%.2000s", line)
		out = append(out, m)
	}
	return out
}

// tempLog is a fresh log file path in a test's temporary folder.
func tempLog(t *testing.T, name string) string {
	return filepath.Join(t.TempDir(), name)
}

// waitLines polls a JSON log file until it holds n lines that keep accepts.
func waitLines(t *testing.T, path string, n int, keep func(map[string]any) bool) []map[string]any {
	t.Helper()
	var got []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = got[:0]
		for _, l := range jsonLines(t, path) {
			if keep(l) {
				got = append(got, l)
			}
		}
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}
