package reqbody

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// call is a tools/call whose arguments make it n bytes long, then tail.
func call(n int, tail string) string {
	head := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"`
	return head + strings.Repeat("x", n-len(head)-len(`"}}}`)) + `"}}}` + tail
}

// anyCall decides on a tools/call's head with an id.
func anyCall(m jsonrpc.Message) (jsonrpc.Message, bool) {
	return m, m.ID != nil && string(m.Method) == "tools/call"
}

// open opens a stream of body, declared as long as it is.
func open(t *testing.T, w http.ResponseWriter, body io.Reader, declared int) *Stream {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body, r.ContentLength = io.NopCloser(body), int64(declared)
	return Open(w, r, Limits{Max: 1 << 20, Timeout: time.Second, MaxBatch: 4}, zap.NewNop(), anyCall)
}

func TestAHeadDecidesOrTheBodyIsReadWhole(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		decides bool
		batch   bool
		err     bool
	}{
		{name: "a call, its id and method before its name", body: call(64<<10, ""), decides: true},
		{name: "a call, its name first", body: `{"params":{"name":"search","arguments":{}},"jsonrpc":"2.0","id":7,"method":"tools/call"}`},
		{name: "another method", body: `{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"p"}}`},
		{name: "a batch", body: `[` + call(1<<10, "") + `]`, batch: true},
		{name: "a body that is no JSON", body: `{"jsonrpc":`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t, httptest.NewRecorder(), strings.NewReader(tc.body), len(tc.body))
			head, ok := b.Head()
			require.Equal(t, tc.decides, ok)
			if ok {
				assert.Equal(t, "search", string(head.Name))
				assert.Equal(t, "7", string(head.ID))
				return
			}
			body, msgs, batch, err := b.Whole()
			if tc.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(body))
			assert.Equal(t, tc.batch, batch)
			assert.Len(t, msgs, 1)
			assert.Same(t, &body[0], &(*b.Buffer())[0], "the body is in the buffer")
		})
	}
}

func TestAnAdmittedBodyGoesUpstreamWhileItIsValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want error
	}{
		{name: "valid", body: call(300<<10, "")},
		{name: "a second message after it", body: call(300<<10, `{"jsonrpc":"2.0"}`), want: &jsonrpc.SyntaxError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &deadlines{ResponseWriter: httptest.NewRecorder()}
			b := open(t, w, strings.NewReader(tc.body), len(tc.body))
			_, ok := b.Head()
			require.True(t, ok)
			b.Start()
			got, err := io.ReadAll(b)
			verdict := b.Wait()
			require.Len(t, w.set, 2, "the deadline is lifted once the body is in")
			if tc.want != nil {
				assert.ErrorIs(t, err, ErrRefused, "the upstream's read fails")
				assert.ErrorAs(t, verdict, &tc.want)
				assert.True(t, strings.HasPrefix(tc.body, string(got)))
				assert.Less(t, len(got), len(tc.body)-len(`{"jsonrpc":"2.0"}`), "the message never ends upstream")
				return
			}
			require.NoError(t, err)
			require.NoError(t, verdict)
			assert.True(t, tc.body == string(got), "the body as sent")
			assert.Positive(t, b.nRetired, "the buffers it outgrew wait for Recycle")
			b.Recycle()
			assert.Zero(t, b.nRetired)
		})
	}
}

func TestABodyRefusedOnItsHeadIsReadHere(t *testing.T) {
	cut := call(64<<10, "")
	cut = cut[:len(cut)-10]
	for _, tc := range []struct {
		name string
		body io.Reader
		want error
	}{
		{name: "whole", body: strings.NewReader(call(64<<10, ""))},
		{name: "cut short", body: strings.NewReader(cut), want: io.ErrUnexpectedEOF},
		{name: "past its deadline", body: &failing{r: strings.NewReader(cut), err: timeout{}}, want: ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t, &deadlines{ResponseWriter: httptest.NewRecorder()}, tc.body, 64<<10)
			_, ok := b.Head()
			require.True(t, ok)
			assert.ErrorIs(t, b.Rest(), tc.want)
			assert.ErrorIs(t, b.Wait(), tc.want)
		})
	}
}

// panicky is a client body that gives a call's head, then panics.
type panicky struct{ given bool }

var errPanics = errors.New("the body panics")

func (p *panicky) Read(b []byte) (int, error) {
	if p.given {
		panic(errPanics)
	}
	p.given = true
	return copy(b, call(64<<10, "")[:1024]), nil
}

func TestABodyWhoseReadingPanicsIsRefused(t *testing.T) {
	w := &deadlines{ResponseWriter: httptest.NewRecorder()}
	b := open(t, w, &panicky{}, 64<<10)
	_, ok := b.Head()
	require.True(t, ok)
	b.Start()
	_, err := io.ReadAll(b)
	assert.ErrorIs(t, err, ErrRefused)
	assert.ErrorIs(t, b.Wait(), ErrUnread)
	assert.True(t, w.set[len(w.set)-1].IsZero(), "the deadline is lifted")
}

func TestAClosedStreamGivesNoMore(t *testing.T) {
	body := call(64<<10, "")
	b := open(t, httptest.NewRecorder(), strings.NewReader(body), len(body))
	b.Start()
	require.NoError(t, b.Wait())
	assert.False(t, b.Closed())
	require.NoError(t, b.Close())
	assert.True(t, b.Closed())
	n, err := b.Read(make([]byte, 16))
	assert.Zero(t, n)
	assert.Equal(t, io.EOF, err)
}
