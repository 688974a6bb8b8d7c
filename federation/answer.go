package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/own"
)

// What every server is asked, and the federation answers: initialize
// (initialize.go), the lists, ping, logging/setLevel, the client's
// notifications and responses (sent to every server the session has),
// the end of the session (DELETE, sent to each). The answer goes through
// the core as a server's would: every feature's hooks read it (the tool
// policy filters the merged list, validate learns its schemas).

// Answer is the handler that answers x, when every server is asked.
func (f *federation) Answer(x *feature.Exchange) http.Handler {
	d := decisionOf(x)
	if d == nil || !d.fanOut {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			f.mergeStreams(w, r, d)
		case http.MethodDelete:
			f.endSession(w, r, d)
		default:
			f.answerPost(w, r, x, d)
		}
	})
}

// OpensSessions: the answer to initialize gives the session id.
func (f *federation) OpensSessions() bool { return true }

// answerPost answers a POST every server is asked.
func (f *federation) answerPost(w http.ResponseWriter, r *http.Request, x *feature.Exchange, d *decision) {
	m := x.Single()
	if m == nil || m.Kind != jsonrpc.Request {
		f.tellAll(r, d, x.Body)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	method := string(m.Method)
	if k, ok := lists[method]; ok {
		f.answerList(w, r, x, d, k)
		return
	}
	switch method {
	case "initialize":
		f.initializeAll(w, r, x)
	case "server/discover":
		f.discoverAll(w, r, x)
	case "logging/setLevel":
		f.askAll(r, d, method, x.Body)
		writeResult(w, m.ID, []byte("{}"))
	default: // ping
		writeResult(w, m.ID, []byte("{}"))
	}
}

// answerList answers a list: every server's, merged, paged.
func (f *federation) answerList(w http.ResponseWriter, r *http.Request, x *feature.Exchange, d *decision, k *kind) {
	m := x.Single()
	var params struct {
		Params struct {
			Cursor *string `json:"cursor"`
		} `json:"params"`
	}
	_ = json.Unmarshal(x.Body, &params)
	bind := []byte(r.Header.Get("Mcp-Session-Id"))
	if d.o != nil {
		bind = []byte(d.o.token)
	}
	offset, total := 0, -1
	if c := params.Params.Cursor; c != nil {
		var err error
		if offset, total, err = f.offset(k, *c, bind); err != nil {
			writeError(w, m.ID, -32602, err.Error())
			return
		}
	}
	generation := f.changed.Load()
	all := f.listAll(r.Context(), r, d.o, k)
	entries, n := f.merge(k, all)
	if total >= 0 && total != len(entries) {
		writeError(w, m.ID, -32602, "the list changed since this cursor was given: list again without a cursor")
		return
	}
	switch k {
	case toolsList, promptsList:
		f.learned(k, n, generation)
	}
	result := f.page(k, entries, offset, bind)
	for _, l := range all {
		if l.err == nil {
			// In the form the first server that listed answered in: an
			// event stream, or JSON.
			if l.stream {
				writeEvent(w, m.ID, result)
				return
			}
			break
		}
	}
	writeResult(w, m.ID, result)
}

// tellAll sends a notification or a response to every server of the
// session, and waits for none of them to answer more than 202.
func (f *federation) tellAll(r *http.Request, d *decision, body []byte) {
	var method string
	if m := oneMessage(body); m != nil {
		method = string(m.Method)
	}
	f.askAll(r, d, method, body)
}

// askAll sends body to every server of the session, in parallel, each
// within list_timeout.
func (f *federation) askAll(r *http.Request, d *decision, method string, body []byte) {
	vars := own.Vars(r)
	ctx := context.WithoutCancel(r.Context())
	var wg sync.WaitGroup
	for _, s := range f.servers {
		sid, connected := "", true
		if d.o != nil {
			sid, connected = d.o.ids[s.name]
		}
		if !connected {
			continue
		}
		wg.Go(func() {
			defer f.recover("federation notify")
			ctx, stop := context.WithTimeout(ctx, f.listTimeout)
			defer stop()
			if _, err := f.ask(ctx, r, varsFor(vars, d.o, s), s, sid, method, body, maxSmallAnswer); err != nil {
				f.logger.Debug("a server did not take a message sent to every server",
					zap.String("server", s.name), zap.String("method", method), zap.Error(err))
			}
		})
	}
	wg.Wait()
}

// maxSmallAnswer bounds what is read of a server's answer to a
// notification, a ping or logging/setLevel.
const maxSmallAnswer = 64 << 10

// endSession ends the client's session on every server.
func (f *federation) endSession(w http.ResponseWriter, r *http.Request, d *decision) {
	if d.o == nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	vars := own.Vars(r)
	var wg sync.WaitGroup
	for _, s := range f.servers {
		sid := d.o.ids[s.name]
		if sid == "" {
			continue
		}
		wg.Go(func() {
			defer f.recover("federation delete")
			ctx, stop := context.WithTimeout(context.WithoutCancel(r.Context()), f.listTimeout)
			defer stop()
			del := r.Clone(ctx)
			del.Body, del.ContentLength = http.NoBody, 0
			del.Header = r.Header.Clone()
			del.Header["Mcp-Session-Id"] = []string{sid}
			out := &own.Discard{}
			del, _ = own.Prepare(del, varsFor(vars, d.o, s), out)
			_ = own.Serve(s.route, out, del)
		})
	}
	wg.Wait()
	w.WriteHeader(http.StatusOK)
}

// oneMessage is the one message of body, nil when it holds none.
func oneMessage(body []byte) *jsonrpc.Message {
	var one [1]jsonrpc.Message
	msgs, batch, err := jsonrpc.Parse(body, one[:0], 1)
	if err != nil || batch || len(msgs) != 1 {
		return nil
	}
	return &msgs[0]
}

// writeResult writes the JSON-RPC result of the request id.
func writeResult(w http.ResponseWriter, id json.RawMessage, result []byte) {
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	writeJSON(w, body)
}

// writeEvent writes the JSON-RPC result of the request id as the one
// event of a stream.
func writeEvent(w http.ResponseWriter, id json.RawMessage, result []byte) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(fmt.Appendf(nil, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, result))
}

// writeError writes a JSON-RPC error for the request id.
func writeError(w http.ResponseWriter, id json.RawMessage, code int, message string) {
	writeJSON(w, envelope.AppendPlainRPCError(nil, id, code, message))
}

// writeEnvelope writes env as the JSON-RPC error of x's request, with
// the code its era gives it.
func writeEnvelope(w http.ResponseWriter, x *feature.Exchange, env *envelope.Envelope) {
	writeJSON(w, env.AppendRPCError(nil, x.Single().ID, x.Era.RPCCode(env)))
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
