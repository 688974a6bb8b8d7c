package envelope_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// update rewrites the golden files from the current output:
//
//	go test ./envelope/ -update
//
// Review the diff before committing: the golden files are the contract.
var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

const goldenDir = "testdata/golden"

// assertGolden compares got with testdata/golden/<name>.txt byte for byte.
func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name+".txt")
	if *update {
		require.NoError(t, os.MkdirAll(goldenDir, 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run: go test ./envelope/ -update")
	assert.Equal(t, string(want), string(got), "output differs from %s", path)
}

// tenth is a variable so that tenth+0.2 is float64 arithmetic, not an exact
// constant expression.
var tenth = 0.1

// contractExampleText is the envelope of section 1 of the wire contract,
// copied from the contract, not from the implementation.
const contractExampleText = `<tool_error code="NOT_FOUND" severity="error">
<message>No invoice with that ID</message>
<recovery>List invoices first, then retry with a real ID</recovery>
<available_actions>
  <action>billing.list_invoices</action>
</available_actions>
<details>
  <detail key="requestedId">inv_2026_9999</detail>
</details>
<retry_after>30 seconds</retry_after>
</tool_error>`

// contractExample builds the envelope of section 1 of the wire contract.
func contractExample() envelope.Envelope {
	return envelope.New(envelope.NotFound, "No invoice with that ID").
		Suggest("List invoices first, then retry with a real ID").
		Actions("billing.list_invoices").
		Details(envelope.Detail{Key: "requestedId", Value: "inv_2026_9999"}).
		RetryAfter(30).
		Envelope()
}

// allGoldenNames lists every golden file some test reads.
func allGoldenNames() []string {
	var names []string
	for _, table := range [][]textCase{
		openTagCases, messageCases, recoveryCases, actionCases, detailCases,
		retryAfterOmittedCases, retryAfterWrittenCases, textEscapingCases,
		attributeEscapingCases, forgeryCases, verbatimTextCases,
	} {
		for _, c := range table {
			names = append(names, c.golden)
		}
	}
	for _, c := range toolResultCases {
		names = append(names, c.golden)
	}
	for _, c := range rpcErrorCases {
		names = append(names, c.golden)
	}
	for _, c := range validationCases {
		names = append(names, c.golden)
	}
	return append(names, "contract_example", "call_tool_result")
}

func TestGoldenFilesAreUniqueAndNoneIsOrphaned(t *testing.T) {
	names := allGoldenNames()
	seen := map[string]bool{}
	for _, n := range names {
		assert.False(t, seen[n], "two cases write golden file %q", n)
		seen[n] = true
	}
	if *update {
		return
	}
	entries, err := os.ReadDir(goldenDir)
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		files = append(files, strings.TrimSuffix(e.Name(), ".txt"))
	}
	slices.Sort(names)
	assert.Equal(t, names, files, "every golden file must belong to exactly one case")
}

func TestGoldenFilesHaveNoTrailingNewline(t *testing.T) {
	if *update {
		t.Skip("rewriting the golden files")
	}
	entries, err := os.ReadDir(goldenDir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(goldenDir, e.Name()))
		require.NoError(t, err)
		assert.False(t, strings.HasSuffix(string(b), "\n"), "%s ends with a newline", e.Name())
	}
}
