package federation

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamingServer is a server named name whose GET answers with stream,
// written by write.
func streamingServer(name string, write func(w http.ResponseWriter) error) *server {
	return testServer(name, handlerOf(func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return nil
		}
		return write(w)
	}), nil)
}

// merged is the client's merged GET stream of f, for a session that holds
// a session id with every server.
func merged(t *testing.T, f *federation) *httptest.ResponseRecorder {
	t.Helper()
	ids := sessionIDs{}
	for _, s := range f.servers {
		ids[s.name] = "sid-" + s.name
	}
	d := &decision{f: f, o: &opened{ids: ids}, fanOut: true}
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	w := httptest.NewRecorder()
	f.mergeStreams(w, r, d)
	return w
}

// An event of many data lines, each under the bound of a line, is held
// to the bound as a whole: a server cannot make the gateway hold an event
// of any length by never ending it.
func TestAServersEventOfManyLinesOverTheBoundIsDroppedFromTheMergedStream(t *testing.T) {
	line := "data: " + strings.Repeat(" ", 64<<10) + "\n"
	big := streamingServer("big", func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if _, err := io.WriteString(w, `data: {"jsonrpc":"2.0","method":"notifications/message","params":{}`+"\n"); err != nil {
			return err
		}
		for range 2 * maxEvent / (64 << 10) {
			if _, err := io.WriteString(w, line); err != nil {
				return err // the gateway stopped reading: the test's point
			}
		}
		_, err := io.WriteString(w, "data: }\n\n")
		return err
	})
	small := streamingServer("small", func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		_, err := io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
		return err
	})
	w := merged(t, testFederation(big, small))
	require.Equal(t, http.StatusOK, w.Code)
	assert.Less(t, w.Body.Len(), maxEvent, "the long event reached the client")
	assert.Contains(t, w.Body.String(), "notifications/tools/list_changed", "the other server's events still do")
}

// A route that goes on writing to its header after it answered (a
// reverse proxy's trailers) does not race the merged stream's reading of
// the answer's content type.
func TestAServerWritingItsHeaderAfterItAnsweredDoesNotRaceTheMergedStream(t *testing.T) {
	late := streamingServer("late", func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range 100 {
			w.Header().Set(http.TrailerPrefix+"X-Late", fmt.Sprint(i))
		}
		_, err := io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"a\"}}\n\n")
		return err
	})
	w := merged(t, testFederation(late))
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), "notifications/resources/updated")
}
