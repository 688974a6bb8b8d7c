package answer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
)

// brokenStream is a watch following the event stream that answers callOne,
// of which the upstream wrote sent before it broke; client is the
// client's side of it.
func brokenStream(t *testing.T, sent string) (u *Watch, client *httptest.ResponseRecorder) {
	t.Helper()
	client = httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	u = &Watch{}
	u.Start(client, &feature.Exchange{Request: r, Messages: parsed(t, callOne), Era: sessionEra}, testCore{}, nil, nil, nil)
	u.Upstream = r
	u.Header().Set("Content-Type", "text/event-stream")
	u.WriteHeader(http.StatusOK)
	_, err := u.Write([]byte(sent))
	require.NoError(t, err)
	require.Equal(t, Following, u.State())
	return u, client
}

// resumingGET is how the upstream answers one GET that resumes a stream:
// with status (0: none, the connection refused), as an event stream when
// stream, in encoding when set, with body, then broken when breaks.
type resumingGET struct {
	status   int
	stream   bool
	encoding string
	body     string
	breaks   bool
}

// fakeUpstream answers the resuming GETs in turn as gets say, written as
// reverse_proxy writes an answer: its header, then its body (a refused
// write ends the copy, with the error), then the panic of an answer the
// upstream broke. It records the Last-Event-IDs sent, the outcome of each
// answer, and the errors its writes met.
type fakeUpstream struct {
	t         *testing.T
	gets      []resumingGET
	lastIDs   []string
	outcomes  []bool
	writeErrs []error
	// sentAt is when each GET was sent, since start.
	start  time.Time
	sentAt []time.Duration
}

func (f *fakeUpstream) send(lastID string, w http.ResponseWriter) error {
	f.lastIDs, f.sentAt = append(f.lastIDs, lastID), append(f.sentAt, time.Since(f.start))
	if len(f.lastIDs) > len(f.gets) {
		f.t.Errorf("GET %d after %q: the upstream expects %d", len(f.lastIDs), lastID, len(f.gets))
		return errors.New("unexpected GET")
	}
	g := f.gets[len(f.lastIDs)-1]
	if g.status == 0 {
		return errors.New("dial tcp: connect: connection refused")
	}
	if g.stream {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	if g.encoding != "" {
		w.Header().Set("Content-Encoding", g.encoding)
	}
	w.WriteHeader(g.status)
	if g.body != "" {
		if _, err := io.WriteString(w, g.body); err != nil {
			f.writeErrs = append(f.writeErrs, err)
			return err
		}
		require.NoError(f.t, http.NewResponseController(w).Flush())
	}
	if g.breaks {
		panic(http.ErrAbortHandler)
	}
	return nil
}

func (f *fakeUpstream) answered(streamed bool) { f.outcomes = append(f.outcomes, streamed) }

func TestAStreamThatBreaksAgainIsResumedUpToMaxResumes(t *testing.T) {
	sent := "id: 4\ndata: " + progress + "\n\n"
	u, client := brokenStream(t, sent)
	up := &fakeUpstream{t: t}
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		up.gets = append(up.gets, resumingGET{status: http.StatusOK, stream: true, body: "id: " + id + "\ndata: " + progress + "\n\n", breaks: true})
	}
	assert.False(t, u.Resume(up.send, up.answered))
	assert.Equal(t, []string{"4", "r1", "r2"}, up.lastIDs, "each GET after the last id the client had, maxResumes of them")
	assert.Equal(t, []bool{true, true, true}, up.outcomes)
	events, lastID := sseClient(client.Body.Bytes())
	assert.Len(t, messagesOf(events), 4, "the replays pass into the client's stream: %q", client.Body)
	assert.Equal(t, "r3", lastID)
	assert.True(t, u.Stream().Repairable(), "no longer resumable: the core ends it with the envelope")
}

func TestAResumedStreamThatEndsWholeGivesTheClientItsResponse(t *testing.T) {
	// The event the break cut off is named so that clients drop it: the
	// upstream replays it whole.
	u, client := brokenStream(t, "id: 4\ndata: "+progress+"\n\nretry: 0\nid: 5\ndata: {\"json")
	up := &fakeUpstream{t: t, gets: []resumingGET{{status: http.StatusOK, stream: true, body: "id: 5\ndata: " + resultOne + "\n\n"}}}
	assert.True(t, u.Resume(up.send, up.answered))
	assert.Equal(t, []string{"4"}, up.lastIDs)
	assert.Equal(t, []bool{true}, up.outcomes)
	events, lastID := sseClient(client.Body.Bytes())
	assert.Equal(t, []string{progress, resultOne}, messagesOf(events), "%q", client.Body)
	assert.Equal(t, "5", lastID)
	assert.Zero(t, u.Stream().Owed())
}

func TestAnAnswerThatResumesNoStreamIsRefusedAtItsFirstByte(t *testing.T) {
	tests := []struct {
		name string
		get  resumingGET
	}{
		{"a 404 page", resumingGET{status: http.StatusNotFound, body: "404 page not found\n"}},
		{"a JSON answer", resumingGET{status: http.StatusOK, body: resultOne}},
		{"an event stream under another status", resumingGET{status: http.StatusAccepted, stream: true, body: "data: " + resultOne + "\n\n"}},
		{"a compressed event stream", resumingGET{status: http.StatusOK, stream: true, encoding: "gzip", body: "\x1f\x8b"}},
		{"a status alone", resumingGET{status: http.StatusMethodNotAllowed}},
		{"no answer", resumingGET{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent := "id: 4\ndata: " + progress + "\n\n"
			u, client := brokenStream(t, sent)
			up := &fakeUpstream{t: t, gets: []resumingGET{tt.get}}
			assert.False(t, u.Resume(up.send, up.answered))
			assert.Equal(t, []string{"4"}, up.lastIDs, "no second GET after an answer that is no stream")
			assert.Equal(t, []bool{false}, up.outcomes, "refused, once")
			if tt.get.body != "" {
				assert.Equal(t, []error{errNotResumed}, up.writeErrs, "its first write is refused: the proxy reads no more")
			}
			assert.Equal(t, sent, client.Body.String(), "nothing of it reaches the client")
			assert.True(t, u.Stream().Repairable())
		})
	}
}

func TestAStreamIsNotResumedWithoutAPlaceToResumeAt(t *testing.T) {
	tests := []struct{ name, sent string }{
		{"no id", "data: " + progress + "\n\n"},
		{"only the id of an event cut off", "data: " + progress + "\n\nid: 5\ndata: {"},
		{"nothing owed", "id: 4\ndata: " + resultOne + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, client := brokenStream(t, tt.sent)
			up := &fakeUpstream{t: t}
			assert.False(t, u.Resume(up.send, up.answered))
			assert.Empty(t, up.lastIDs)
			assert.Equal(t, tt.sent, client.Body.String())
		})
	}
}

func TestTheWaitARetryFieldAsksBeforeAResumeIsBounded(t *testing.T) {
	tests := []struct {
		retry string
		wait  time.Duration
	}{
		{"1500", 1500 * time.Millisecond},
		{"3600000", maxResumeWait},
		{"0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.retry, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u, _ := brokenStream(t, "retry: "+tt.retry+"\nid: 4\ndata: "+progress+"\n\n")
				up := &fakeUpstream{t: t, start: time.Now(), gets: []resumingGET{{status: http.StatusOK, stream: true, body: "data: " + resultOne + "\n\n"}}}
				assert.True(t, u.Resume(up.send, up.answered))
				assert.Equal(t, []time.Duration{tt.wait}, up.sentAt, "the GET waits what the stream asked, within the bound")
			})
		})
	}
}

func TestAStreamWhoseUpstreamRequestEndsInTheWaitIsNotResumed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, _ := brokenStream(t, "retry: 2000\nid: 4\ndata: "+progress+"\n\n")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		u.Upstream = u.Upstream.WithContext(ctx)
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		up := &fakeUpstream{t: t}
		start := time.Now()
		assert.False(t, u.Resume(up.send, up.answered))
		assert.Equal(t, time.Second, time.Since(start), "the wait ends with the request")
		assert.Empty(t, up.lastIDs)
	})
}

func TestAPanicOfTheRouteOtherThanABreakGoesOn(t *testing.T) {
	u, _ := brokenStream(t, "id: 4\ndata: "+progress+"\n\n")
	boom := errors.New("boom")
	assert.PanicsWithValue(t, boom, func() {
		u.Resume(func(string, http.ResponseWriter) error { panic(boom) }, func(bool) {})
	})

	u, _ = brokenStream(t, "id: 4\ndata: "+progress+"\n\n")
	gets := 0
	assert.NotPanics(t, func() {
		assert.False(t, u.Resume(func(string, http.ResponseWriter) error {
			gets++
			panic(http.ErrAbortHandler)
		}, func(bool) {}))
	}, "a break before any answer is a GET that resumed nothing")
	assert.Equal(t, 1, gets)
}
