package caddyfile_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/caddymcp/caddy-mcp" // registers the mcp directive and its order
)

// update rewrites the expected half of every golden file from the adapter's
// current output:
//
//	go test ./caddyfile/ -run Adapt -update
//
// Review the diff before committing: the golden files are the contract.
var update = flag.Bool("update", false, "rewrite testdata/adapt from the current output")

// separator splits a golden file into its Caddyfile and what the adapter makes
// of it, the layout of Caddy's own caddytest/integration/caddyfile_adapt.
const separator = "----------"

// TestCaddyfileAdaptsToGoldenJSON adapts each testdata/adapt/*.caddyfiletest
// and compares the result with the JSON below its separator line or, when
// that text is not JSON, expects an error containing it.
func TestCaddyfileAdaptsToGoldenJSON(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "adapt", "*.caddyfiletest"))
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no golden files in testdata/adapt")

	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".caddyfiletest"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			text := strings.ReplaceAll(string(data), "\r\n", "\n")
			config, expected, ok := strings.Cut(text, "\n"+separator+"\n")
			require.True(t, ok, "%s has no %s line", path, separator)
			config = strings.TrimSpace(config) + "\n"
			expected = strings.TrimSpace(expected)

			if *update {
				out, err := adapt(config)
				writeGolden(t, path, config, out, err)
				return
			}
			if strings.HasPrefix(expected, "{") {
				assert.True(t, caddytest.CompareAdapt(t, path, config, "caddyfile", expected),
					"adapted JSON differs from %s (diff on stdout; -update rewrites it)", path)
				return
			}
			_, err = adapt(config)
			require.Error(t, err, "%s should not adapt", path)
			assert.Contains(t, err.Error(), expected)
		})
	}
}

// adapt returns the Caddyfile's JSON indented as caddytest.CompareAdapt
// indents it.
func adapt(config string) ([]byte, error) {
	raw, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(config), nil)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "\t"); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeGolden rewrites path with config and the adapter's output: the JSON,
// or the error message when adapting failed.
func writeGolden(t *testing.T, path, config string, out []byte, err error) {
	t.Helper()
	if err != nil {
		out = []byte(err.Error())
	}
	golden := config + separator + "\n" + string(out) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(golden), 0o644))
}

// A first secret, which seals, that is empty where the Caddyfile is adapted
// is a warning at its line, naming its placeholder: Caddy would refuse the
// config here, but it may run elsewhere. An old secret may be unset.
func TestAnUnsetSealingSecretIsWarnedOfAtItsLine(t *testing.T) {
	t.Setenv("CADDY_MCP_ADAPT_SECRET", "the-current-session-secret-0123456789")
	config := `:8080 {
	mcp {
		sessions {
			ttl 1h
			secret {env.CADDY_MCP_ADAPT_SECRET_UNSET} {env.CADDY_MCP_ADAPT_SECRET}
		}
	}
	reverse_proxy 127.0.0.1:9000
}
`
	_, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(config), nil)
	require.NoError(t, err, "adapting may happen where the secret is not set")
	require.Len(t, warnings, 1)
	w := warnings[0]
	assert.Equal(t, "Caddyfile", w.File)
	assert.Equal(t, 5, w.Line)
	assert.Equal(t, "mcp", w.Directive)
	assert.True(t, strings.HasPrefix(w.Message, "sessions: secret {env.CADDY_MCP_ADAPT_SECRET_UNSET} is empty: environment variable CADDY_MCP_ADAPT_SECRET_UNSET is not set"), w.Message)

	rotated := strings.Replace(config, "{env.CADDY_MCP_ADAPT_SECRET_UNSET} {env.CADDY_MCP_ADAPT_SECRET}", "{env.CADDY_MCP_ADAPT_SECRET} {env.CADDY_MCP_ADAPT_SECRET_UNSET}", 1)
	_, warnings, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte(rotated), nil)
	require.NoError(t, err)
	assert.Empty(t, warnings, "an old secret may be unset between rotations")
}

// TestGoldenCaddyfilesAreAsCaddyFmtWritesThem: every golden Caddyfile is
// written as caddy fmt writes it, so that what the goldens prove adapts
// is what an operator's formatted file holds (nested blocks such as a
// federation's server blocks included).
func TestGoldenCaddyfilesAreAsCaddyFmtWritesThem(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "adapt", "*.caddyfiletest"))
	require.NoError(t, err)
	for _, path := range paths {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		config, _, _ := strings.Cut(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n"+separator+"\n")
		config = strings.TrimSpace(config) + "\n"
		assert.Equal(t, config, string(caddyfile.Format([]byte(config))), "caddy fmt changes %s", path)
	}
}
