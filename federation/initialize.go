package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/own"
	"github.com/caddymcp/caddy-mcp/internal/version"
)

// One initialize, every server. The client's initialize is sent as it is
// to every server at once (eagerly: the client learns the merged
// capabilities and instructions from its answer, which no later call
// could change, and the servers are asked in parallel, so it costs the
// slowest server's time, not their sum). The answer merges their
// capabilities and instructions; its session id seals each server's own.
// A server that does not answer within list_timeout is left out: its
// first call connects it.

// initialized is one server's answer to initialize.
type initialized struct {
	ok        bool
	sessionID string
	replica   string
	// refused is the JSON-RPC error the server answered with, when it
	// did: reached, but of another mind (an older server does not know
	// server/discover).
	refused json.RawMessage
	// err is why the server was not reached or not read, when it was not.
	err    error
	result struct {
		ProtocolVersion   string                     `json:"protocolVersion"`
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
	}
}

// askEvery sends the client's body (initialize, server/discover) to every
// server at once, each within list_timeout, with no session, and reads
// their answers.
func (f *federation) askEvery(r *http.Request, body []byte, method string) []initialized {
	answers := make([]initialized, len(f.servers))
	vars := own.Vars(r)
	var wg sync.WaitGroup
	for i, s := range f.servers {
		wg.Go(func() {
			defer f.recover("federation " + method)
			ctx, stop := context.WithTimeout(r.Context(), f.listTimeout)
			defer stop()
			rep, err := f.ask(ctx, r, vars, s, "", method, body, maxInitAnswer)
			if err == nil && rep.rpcErr != nil {
				answers[i].refused = rep.rpcErr
				err = fmt.Errorf("the server refused %s: %s", method, clipBytes(rep.rpcErr))
			}
			if err == nil {
				err = json.Unmarshal(rep.result, &answers[i].result)
			}
			if err == nil && len(rep.sessionID) > own.MaxSessionID {
				err = fmt.Errorf("a session id of %d bytes, over the %d the gateway keeps", len(rep.sessionID), own.MaxSessionID)
			}
			if err != nil {
				answers[i].err = err
				f.logger.Warn("a server did not answer "+method+": it is left out (for initialize, its first call connects it)",
					zap.String("server", s.name), zap.Error(err))
				return
			}
			answers[i].ok, answers[i].sessionID, answers[i].replica = true, rep.sessionID, rep.replica
		})
	}
	wg.Wait()
	return answers
}

// discoverAll answers server/discover (MCP 2026-07-28): the versions every
// server that answered supports, their capabilities and instructions
// merged. Servers that share no version are refused in words: no client
// could speak to all of them.
func (f *federation) discoverAll(w http.ResponseWriter, r *http.Request, x *feature.Exchange) {
	m := x.Single()
	answers := f.askEvery(r, x.Body, "server/discover")
	var first *initialized
	var versions []string
	var refused json.RawMessage
	for i := range answers {
		switch {
		case answers[i].refused != nil:
			// Reached, and refused: a server of the older era, which a
			// client of this one cannot speak to. The client falls back
			// to initialize, which every server takes.
			refused, versions = answers[i].refused, nil
		case !answers[i].ok:
		case first == nil:
			first = &answers[i]
			if refused == nil {
				versions = slices.Clone(answers[i].result.SupportedVersions)
			}
		default:
			versions = slices.DeleteFunc(versions, func(v string) bool { return !slices.Contains(answers[i].result.SupportedVersions, v) })
		}
	}
	switch {
	case first == nil && refused != nil:
		// Every server reached refused it: their words, as one server's.
		writeJSON(w, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":%s}`, m.ID, refused))
		return
	case first == nil:
		env := noServer("server/discover", len(f.servers), f.retryAfter)
		writeEnvelope(w, x, &env)
		return
	case len(versions) == 0:
		env := noCommonVersion()
		writeEnvelope(w, x, &env)
		return
	}
	merged := f.mergeInitialized(answers, first)
	var result map[string]any
	_ = json.Unmarshal(merged, &result)
	delete(result, "protocolVersion")
	result["supportedVersions"] = versions
	b, _ := json.Marshal(result)
	writeResult(w, m.ID, b)
}

// initializeAll answers the client's initialize.
func (f *federation) initializeAll(w http.ResponseWriter, r *http.Request, x *feature.Exchange) {
	m := x.Single()
	answers := f.askEvery(r, x.Body, "initialize")
	ids, pins := sessionIDs{}, map[string]string{}
	var first *initialized
	for i := range answers {
		if answers[i].refused != nil {
			// Reached, and refused (a server of MCP 2026-07-28 alone,
			// which has no initialize): served without a session, its
			// calls answered in its own words, rather than connected
			// again and again.
			ids[f.servers[i].name] = ""
		}
		if answers[i].ok {
			ids[f.servers[i].name] = answers[i].sessionID
			if answers[i].replica != "" {
				pins[f.servers[i].name] = answers[i].replica
			}
			if first == nil {
				first = &answers[i]
			}
		}
	}
	if first == nil {
		for _, a := range answers {
			if a.refused != nil {
				// Every server reached refused it: their words, as one
				// server's.
				writeJSON(w, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":%s}`, m.ID, a.refused))
				return
			}
		}
		env := noServer("initialize", len(f.servers), f.retryAfter)
		writeEnvelope(w, x, &env)
		return
	}
	if f.stateful(answers) && x.Era.Resumes() {
		token, err := f.sealWithin(x, ids, pins, initializeParams(x.Body))
		if err != nil {
			f.logger.Error("sealing a federated session id failed", zap.Error(err))
			env := noServer("initialize", len(f.servers), f.retryAfter)
			writeEnvelope(w, x, &env)
			return
		}
		w.Header().Set("Mcp-Session-Id", token)
		f.refusedAtOpen(token, answers)
	}
	writeResult(w, m.ID, f.mergeInitialized(answers, first))
}

// sealWithin seals ids as seal does, leaving out the server with the
// longest session id until the token fits the bound a session id is read
// within: one server's long id must not cost the client every server. A
// server left out is connected by its first call, as one that did not
// answer initialize.
func (f *federation) sealWithin(x *feature.Exchange, ids sessionIDs, pins map[string]string, params []byte) (string, error) {
	for {
		token, err := f.seal(x, ids, pins, params)
		if err == nil {
			return token, nil
		}
		var longest *server
		for name, id := range ids {
			s := f.byName[name]
			if id != "" && (longest == nil || len(id) > len(ids[longest.name]) ||
				len(id) == len(ids[longest.name]) && s.index > longest.index) {
				longest = s
			}
		}
		if longest == nil {
			return "", err // no id to leave out: not a matter of length
		}
		f.logger.Warn("a server's session id makes the client's too long: the server is left out, and its first call connects it",
			zap.String("server", longest.name), zap.Int("bytes", len(ids[longest.name])), zap.Error(err))
		delete(ids, longest.name)
		delete(pins, longest.name)
	}
}

// maxInitAnswer bounds what is read of a server's answer to initialize.
const maxInitAnswer = 1 << 20

// stateful reports whether the session needs a session id: a server gave
// one, or one is not connected yet (its first call connects it, with the
// params the session id carries).
func (f *federation) stateful(answers []initialized) bool {
	for _, a := range answers {
		if !a.ok && a.refused == nil || a.sessionID != "" {
			return true
		}
	}
	return false
}

// initializeParams are the params of the client's initialize, compacted.
func initializeParams(body []byte) []byte {
	var msg struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || len(msg.Params) > 2<<10 {
		return nil
	}
	return msg.Params
}

// mergeInitialized is the result the client gets: the first server's
// protocol version, every server's capabilities merged (a capability one
// server has is the federation's; a flag one server sets is set), and
// their instructions, each under its server's name.
func (f *federation) mergeInitialized(answers []initialized, first *initialized) []byte {
	caps := map[string]map[string]any{}
	var instructions []string
	for i, a := range answers {
		if !a.ok {
			continue
		}
		if a.result.ProtocolVersion != first.result.ProtocolVersion {
			f.logger.Warn("servers answered initialize with different protocol versions: the client is told the first's",
				zap.String("server", f.servers[i].name), zap.String("version", a.result.ProtocolVersion), zap.String("told", first.result.ProtocolVersion))
		}
		for name, raw := range a.result.Capabilities {
			var members map[string]any
			if json.Unmarshal(raw, &members) != nil {
				continue
			}
			merged, ok := caps[name]
			if !ok {
				merged = map[string]any{}
				caps[name] = merged
			}
			for k, v := range members {
				if b, isBool := v.(bool); isBool {
					prev, _ := merged[k].(bool)
					merged[k] = prev || b
				} else if _, set := merged[k]; !set {
					merged[k] = v
				}
			}
		}
		if text := strings.TrimSpace(a.result.Instructions); text != "" {
			instructions = append(instructions, "Server "+f.servers[i].name+": "+text)
		}
	}
	result := map[string]any{
		"protocolVersion": first.result.ProtocolVersion,
		"capabilities":    caps,
		"serverInfo":      map[string]string{"name": "caddy-mcp", "version": version.String()},
	}
	if len(instructions) > 0 {
		result["instructions"] = strings.Join(instructions, "\n\n")
	}
	b, _ := json.Marshal(result)
	return b
}

// initialize opens a session with s for a client's session, with the
// client's initialize params: the gateway sends initialize, then
// notifications/initialized.
func (f *federation) initialize(ctx context.Context, from *http.Request, vars map[string]any, s *server, params []byte) (id, replica string, err error) {
	if params == nil {
		return "", "", errors.New("the session carries no initialize params")
	}
	id, init, err := own.Initialize(ctx, from, vars, s.route, params)
	return id, replicaOf(init), err
}
