package reqbody

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadlines is a connection whose read deadlines are noted.
type deadlines struct {
	http.ResponseWriter
	set []time.Time
}

func (d *deadlines) SetReadDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// wrapped is a writer that wraps another, as Caddy's do.
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// failing is a client body that sends what it has, then fails with err.
type failing struct {
	r    *strings.Reader
	err  error
	read int
}

func (f *failing) Read(p []byte) (int, error) {
	if f.r.Len() == 0 {
		return 0, f.err
	}
	n, _ := f.r.Read(p)
	f.read += n
	return n, nil
}

// request is a POST of body, declared declared bytes long (-1: unknown),
// that fails with err once body is sent (io.EOF: ends).
func request(body string, declared int64, err error) (*http.Request, *failing) {
	f := &failing{r: strings.NewReader(body), err: err}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body, r.ContentLength = io.NopCloser(f), declared
	return r, f
}

type timeout struct{}

func (timeout) Error() string { return "i/o timeout" }
func (timeout) Timeout() bool { return true }

func TestReadTakesABodyWithinItsBounds(t *testing.T) {
	big := strings.Repeat("b", 100<<10)
	for _, tc := range []struct {
		name     string
		body     string
		declared int64
		err      error // the client's, once its body is sent
		want     error
	}{
		{name: "a small body, declared", body: "{}", declared: 2, err: io.EOF},
		{name: "a small body, its length unknown", body: "{}", declared: -1, err: io.EOF},
		{name: "a large body, declared", body: big, declared: int64(len(big)), err: io.EOF},
		{name: "a large body, its length unknown", body: big, declared: -1, err: io.EOF},
		{name: "a body of exactly the limit, its length unknown", body: strings.Repeat("b", 128<<10), declared: -1, err: io.EOF},
		{name: "a body one byte over, its length unknown", body: strings.Repeat("b", 128<<10+1), declared: -1, err: io.EOF, want: ErrTooLarge},
		{name: "a body declared over the limit", body: "{}", declared: 128<<10 + 1, err: io.EOF, want: ErrTooLarge},
		{name: "a body cut short, as net/http reads it", body: big, declared: int64(len(big)) + 1, err: io.ErrUnexpectedEOF, want: io.ErrUnexpectedEOF},
		{name: "a small body shorter than declared", body: "{", declared: 2, err: io.EOF, want: io.ErrUnexpectedEOF},
		{name: "over Caddy's request_body", body: big, declared: -1, err: &http.MaxBytesError{Limit: 1}, want: ErrTooLarge},
		{name: "past its deadline", body: big, declared: -1, err: os.ErrDeadlineExceeded, want: ErrTimeout},
		{name: "past its deadline, as a net.Error says", body: "{", declared: -1, err: timeout{}, want: ErrTimeout},
		{name: "a broken connection", body: big, declared: -1, err: io.ErrClosedPipe, want: io.ErrClosedPipe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, client := request(tc.body, tc.declared, tc.err)
			w := &deadlines{ResponseWriter: httptest.NewRecorder()}
			body, pooled, err := Read(wrapped{w}, r, Limits{Max: 128 << 10, Timeout: time.Second})
			require.Len(t, w.set, 2, "a deadline set, then lifted")
			assert.True(t, w.set[1].IsZero())
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
				assert.True(t, body == nil, "no body")
				assert.Nil(t, pooled)
				assert.LessOrEqual(t, client.read, 128<<10+1, "nothing read past one byte over")
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.body == string(body), "the body as sent")
			assert.Equal(t, len(tc.body) > smallBody || tc.declared < 0, pooled != nil, "large bodies and those of unknown length are in recycled buffers")
		})
	}
}

func TestATimeoutWithoutADeadlineIsABrokenBody(t *testing.T) {
	r, _ := request("{", -1, os.ErrDeadlineExceeded)
	_, _, err := Read(httptest.NewRecorder(), r, Limits{Max: 1 << 20, Timeout: time.Second})
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.NotErrorIs(t, err, ErrTimeout, "no deadline of the gateway's passed")
}

// trickle is a client body that sends one byte per read, noting the most
// room it was given beyond what one buffer of max(16 KiB, four times the
// bytes sent) would hold.
type trickle struct {
	left, sent int
	over       int
}

func (c *trickle) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.ErrUnexpectedEOF // as net/http reads a body cut short
	}
	c.over = max(c.over, c.sent+len(p)-max(firstChunk, 4*c.sent))
	p[0] = 'x'
	c.left--
	c.sent++
	return 1, nil
}

func TestMemoryFollowsTheBytesReceivedNotTheLengthDeclared(t *testing.T) {
	const declared = 4 << 20
	for _, sent := range []int{1, firstChunk + 1, 300 << 10} {
		c := &trickle{left: sent}
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Body, r.ContentLength = io.NopCloser(c), declared
		_, pooled, err := Read(httptest.NewRecorder(), r, Limits{Max: declared, Timeout: time.Second})
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Nil(t, pooled, "the buffer went back")
		assert.LessOrEqual(t, c.over, 0, "sent %d of %d: the buffer grows with the bytes", sent, declared)
	}
}

func TestBuffersComeInSizeClasses(t *testing.T) {
	for _, tc := range []struct{ n, class, size int }{
		{0, 0, firstChunk},
		{firstChunk, 0, firstChunk},
		{firstChunk + 1, 1, 64 << 10},
		{64 << 10, 1, 64 << 10},
		{64<<10 + 1, 2, 128 << 10},
		{maxPooled, classes - 1, maxPooled},
		{maxPooled + 1, -1, maxPooled + 1},
	} {
		class, size := classOf(tc.n)
		assert.Equal(t, tc.class, class, "class of %d", tc.n)
		assert.Equal(t, tc.size, size, "size of %d", tc.n)
		p := Get(tc.n)
		assert.Equal(t, tc.size, cap(*p))
		Put(p)
	}
}

func TestBuffersGrowFourfoldWhileSmallThenTwofold(t *testing.T) {
	for _, tc := range []struct{ c, limit, want int }{
		{firstChunk, 1 << 20, 64 << 10},
		{64 << 10, 1 << 20, 128 << 10},
		{512 << 10, 1 << 20, 1 << 20},
		{512 << 10, 600 << 10, 600 << 10},
	} {
		assert.Equal(t, tc.want, grown(tc.c, tc.limit), "from %d within %d", tc.c, tc.limit)
	}
	p := Get(firstChunk)
	copy(*p, "abc")
	q := grow(p, 3, 1<<20)
	assert.Equal(t, "abc", string((*q)[:3]), "the bytes received move with it")
}

func TestReaderGivesTheBodyBackUntilClosed(t *testing.T) {
	var b Reader
	b.Reset([]byte("abcdef"))
	p := make([]byte, 4)
	n, err := b.Read(p)
	require.NoError(t, err)
	assert.Equal(t, "abcd", string(p[:n]))
	assert.False(t, b.Closed())
	require.NoError(t, b.Close())
	assert.True(t, b.Closed())
	n, err = b.Read(p)
	assert.Zero(t, n)
	assert.Equal(t, io.EOF, err, "once closed, nothing more is read from the buffer")
}
