package test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/resultstore"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// A caller that floods the store with large results fills its own bounds,
// not the disk: past them its calls are refused with words that say why,
// what it kept stays readable, and another caller keeps results of its
// own. Through a real Caddy, on its file storage.

// The flood's bounds: a caller keeps floodCount results, floodBytes bytes,
// and one result is at most floodMax bytes of text, more than a chunk
// (resultstore.DefaultChunk), so that one refused has a chunk stored.
const (
	floodBytes = 3 << 20
	floodCount = 4
	floodMax   = 2 << 20
)

// floodResults is the mcp block of a gateway that pages past 64 KiB, within
// the flood's bounds.
var floodResults = strings.Replace(pageResults, "\t\t\tkey "+pageKey+"\n",
	"\t\t\tkey "+pageKey+"\n\t\t\tper_principal "+strconv.Itoa(floodBytes)+" "+strconv.Itoa(floodCount)+"\n\t\t\tmax_result "+strconv.Itoa(floodMax)+"\n", 1)

// sealOverhead is what sealing adds to a stored chunk: its nonce and its tag.
const sealOverhead = 12 + 16

func TestPageFloodFillsTheCallersBoundsNotTheDisk(t *testing.T) {
	require.Contains(t, floodResults, "per_principal")
	gw := mcptest.StartGateway(t, floodResults+mcptest.ProxyTo(mcptest.StartTextServer(t)))
	endpoint := gw.URL + mcptest.MCPPath
	kept := filepath.Join(gw.Storage, filepath.FromSlash(resultstore.Prefix))

	// A floods with results of 1 MB: three fit its bytes, and the ones
	// after them are refused as they are written, leaving nothing stored.
	a := goSession(t, endpoint)
	const big = 1_000_000
	var aLinks []string
	for range floodBytes / big {
		_, link, _ := pagedCall(t, a, big)
		aLinks = append(aLinks, link.URI)
	}
	for range 2 {
		refused := refusedCall(t, a, big)
		assertWhyNotKept(t, refused, "a result to keep, past the caller's bytes", strconv.Itoa(resultstore.DefaultPerOwner), strconv.Itoa(floodBytes))
		assert.ElementsMatch(t, idsOf(aLinks), keptIDs(t, kept), "a refused result leaves nothing stored")
	}

	// B, meanwhile, keeps results of its own, up to its count.
	b := goSession(t, endpoint)
	const small = 100_000
	var bLinks []string
	for range floodCount {
		_, link, _ := pagedCall(t, b, small)
		bLinks = append(bLinks, link.URI)
	}
	refused := refusedCall(t, b, small)
	assertWhyNotKept(t, refused, "a result to keep, past the caller's count", strconv.Itoa(resultstore.DefaultPerOwnerCount), strconv.Itoa(floodCount))

	// C's one result over max_result is refused once a chunk of it
	// is stored, its writer aborted: all it stored is deleted.
	c := goSession(t, endpoint)
	refused = refusedCall(t, c, floodMax+500_000)
	assertWhyNotKept(t, refused, "a result to keep, over the bound of one result", strconv.Itoa(resultstore.DefaultMaxResult), strconv.Itoa(floodMax))
	assert.ElementsMatch(t, append(idsOf(aLinks), idsOf(bLinks)...), keptIDs(t, kept), "only what was kept is stored")

	// What each kept is readable, whole, and the disk holds no more than
	// their bounds, sealed.
	for who, links := range map[string][]string{"A": aLinks, "B": bLinks} {
		cs, n := a, big
		if who == "B" {
			cs, n = b, small
		}
		for _, uri := range links {
			text, _ := readPages(t, cs, uri)
			require.True(t, text == mcptest.LongText(n), "%s's result %s, read back whole", who, uri)
		}
		chunks, manifests := storedBytes(t, kept, idsOf(links))
		t.Logf("%s: %d results kept, %d bytes of chunks and %d of manifests on disk", who, len(links), chunks, manifests)
		assert.LessOrEqual(t, chunks, int64(floodBytes+len(links)*sealOverhead), "%s's chunks on disk are within its bound", who)
		assert.LessOrEqual(t, manifests, int64(len(links)*1024), "%s's manifests are small", who)
	}
}

// refusedCall calls dump {n} and returns the envelope it is refused with.
func refusedCall(t *testing.T, cs *mcp.ClientSession, n int) envelope.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "dump", Arguments: map[string]any{"n": n}})
	require.NoError(t, err)
	assert.True(t, res.IsError, "a refusal is an error")
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok)
	env, err := envelope.Parse(text.Text)
	require.NoError(t, err, text.Text)
	return env.Envelope
}

// assertWhyNotKept checks got against the words.golden entry name: the
// same code and reason, and the same words of why nothing was kept and of
// what to do, the golden's bound (dflt, the default) read as this
// gateway's (bound).
func assertWhyNotKept(t *testing.T, got envelope.Envelope, name, dflt, bound string) {
	t.Helper()
	want := goldenWord(t, name)
	assert.Equal(t, want.Code, got.Code)
	assert.Equal(t, detailOf(want, "reason"), detailOf(got, "reason"), got.Message)
	_, why, ok := strings.Cut(want.Message, "could not keep it for you to read in pages: ")
	require.True(t, ok, want.Message)
	why = strings.Replace(why, dflt, bound, 1)
	assert.True(t, strings.HasSuffix(got.Message, "could not keep it for you to read in pages: "+why), "%q\nends with %q", got.Message, why)
	assert.NotContains(t, got.Message, "bytes, over its budget", "what was read before the refusal is not the result's size")
	_, more, ok := strings.Cut(want.Recovery, "or ask for a summary.")
	require.True(t, ok, want.Recovery)
	assert.True(t, strings.HasSuffix(got.Recovery, "or ask for a summary."+more), "%q\nends with %q", got.Recovery, more)
}

// goldenWord is the envelope of the entry name in handler/testdata/words.golden.
func goldenWord(t *testing.T, name string) envelope.Envelope {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "handler", "testdata", "words.golden"))
	require.NoError(t, err)
	_, entry, ok := strings.Cut(string(b), "\n### "+name+"\n")
	require.True(t, ok, "words.golden has %q", name)
	env, err := envelope.Parse(entry)
	require.NoError(t, err)
	return env.Envelope
}

// idsOf are the ids of the results links name.
func idsOf(links []string) []string {
	ids := make([]string, len(links))
	for i, uri := range links {
		ids[i] = strings.TrimPrefix(uri, "caddymcp://results/")
	}
	return ids
}

// keptIDs are the results the storage folder kept holds, by their folders.
func keptIDs(t *testing.T, kept string) []string {
	t.Helper()
	entries, err := os.ReadDir(kept)
	require.NoError(t, err)
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// storedBytes are the bytes the results ids take in the storage folder
// kept: their chunks', and their manifests'.
func storedBytes(t *testing.T, kept string, ids []string) (chunks, manifests int64) {
	t.Helper()
	for _, id := range ids {
		err := filepath.WalkDir(filepath.Join(kept, id), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if d.Name() == "manifest" {
				manifests += info.Size()
			} else {
				chunks += info.Size()
			}
			return nil
		})
		require.NoError(t, err)
	}
	return chunks, manifests
}

// A reload that keeps the store's storage, key and bounds keeps the
// callers' counts: what a caller kept before it still counts against its
// bound, and is still read.
func TestPageAReloadKeepsTheCallersCounts(t *testing.T) {
	site := floodResults + mcptest.ProxyTo(mcptest.StartTextServer(t))
	gw := mcptest.StartGateway(t, site)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "reload", Version: "0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: gw.URL + mcptest.MCPPath, HTTPClient: mcptest.ResendingClient()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	const small = 100_000
	var links []string
	for range floodCount {
		_, link, _ := pagedCall(t, cs, small)
		links = append(links, link.URI)
	}

	gw.Reload(t, site)
	refused := refusedCall(t, cs, small)
	assertWhyNotKept(t, refused, "a result to keep, past the caller's count", strconv.Itoa(resultstore.DefaultPerOwnerCount), strconv.Itoa(floodCount))
	for _, uri := range links {
		text, _ := readPages(t, cs, uri)
		require.True(t, text == mcptest.LongText(small), "%s read back after the reload", uri)
	}
}
