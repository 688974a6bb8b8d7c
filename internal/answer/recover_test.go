package answer

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAKeepaliveWhoseWriterPanicsEndsAndLeavesTheStreamItsWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := recoveredAt(siteKeepalive)
		ka := startKeepalive(&panickingWriter{hdr: http.Header{}}, every, nil)
		time.Sleep(every + time.Second)
		synctest.Wait()
		select {
		case <-ka.stopped:
		default:
			t.Fatal("the keep-alives go on after their writer panicked")
		}
		assert.Equal(t, before+1, recoveredAt(siteKeepalive))

		w := httptest.NewRecorder()
		_, err := ka.write([]byte("data: x\n\n"), w.Write)
		require.NoError(t, err, "the stream's writes do not wait for a lock the panic held")
		assert.Equal(t, "data: x\n\n", w.Body.String())
		ka.stop()
	})
}

// panickingWriter is a client connection whose writes panic.
type panickingWriter struct{ hdr http.Header }

var errWriterPanics = errors.New("the writer panics")

func (p *panickingWriter) Header() http.Header { return p.hdr }

func (p *panickingWriter) WriteHeader(int) {}

func (p *panickingWriter) Write([]byte) (int, error) { panic(errWriterPanics) }
