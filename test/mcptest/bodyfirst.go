package mcptest

import (
	"bytes"
	"io"
	"net/http"
)

// BodyFirst is a transport for a proxy the tests put in front of a server
// or a gateway (httputil.ReverseProxy): it reads the whole body of each
// request before rt sends it. A proxy hands the transport the body of the
// request it serves, which its server closes once the proxy has written
// the answer's header (a server that answers a POST with a stream writes
// its header at once); the transport, which reads the body once more after
// its Content-Length to find its end, then meets a closed body, and closes
// the connection the answer is still streaming on. On a loaded machine the
// transport reads late often enough to break streams now and then.
func BodyFirst(rt http.RoundTripper) http.RoundTripper { return bodyFirst{rt} }

type bodyFirst struct{ rt http.RoundTripper }

func (b bodyFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return b.rt.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return b.rt.RoundTrip(out)
}
