package mcptest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TokenServer is an official Go SDK MCP server, stateful, on a loopback
// port, that records the credentials every request to it brings: its
// Authorization header, X-Api-Key and Cookie, and its Mcp-Session-Id,
// told apart as one the server issued or not. Its tool whoami answers what
// its request's bearer token says (Identity): the payload of the JWT,
// read without its signature checked (the test holds the issuer).
type TokenServer struct {
	// URL is its endpoint, "http://127.0.0.1:PORT/mcp".
	URL string

	mu       sync.Mutex
	requests []Credentials
	issued   map[string]bool
}

// Credentials are what one request to a TokenServer brought.
type Credentials struct {
	Method        string
	Authorization string
	APIKey        string
	Cookie        string
	// SessionID is its Mcp-Session-Id, and Issued whether the server had
	// issued it.
	SessionID string
	Issued    bool
}

// Identity is whoami's answer: the claims of the request's bearer token
// ("" and nil when it had none, or not a JWT) and its X-Api-Key.
type Identity struct {
	Aud      []string       `json:"aud,omitempty"`
	Sub      string         `json:"sub,omitempty"`
	ClientID string         `json:"client_id,omitempty"`
	Scope    string         `json:"scope,omitempty"`
	Act      map[string]any `json:"act,omitempty"`
	// Bearer is whether the request had an Authorization header.
	Bearer bool   `json:"bearer"`
	APIKey string `json:"api_key,omitempty"`
}

// ActSub is the subject of the token's actor (RFC 8693 §4.1), "" when it
// names none.
func (id Identity) ActSub() string {
	sub, _ := id.Act["sub"].(string)
	return sub
}

// StartTokenServer serves a TokenServer until the test ends.
func StartTokenServer(t testing.TB) *TokenServer {
	t.Helper()
	s := &TokenServer{issued: map[string]bool{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "tokenserver", Version: "0"}, nil)
	server.AddTool(&mcp.Tool{
		Name:        "whoami",
		Description: "What the bearer token of the request says.",
		InputSchema: map[string]any{"type": "object"},
	}, whoami)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	s.URL = ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		h.ServeHTTP(&sessionRecorder{ResponseWriter: w, s: s}, r)
	}))
	return s
}

func (s *TokenServer) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sid := r.Header.Get("Mcp-Session-Id")
	s.requests = append(s.requests, Credentials{
		Method: r.Method, Authorization: r.Header.Get("Authorization"), APIKey: r.Header.Get("X-Api-Key"),
		Cookie: r.Header.Get("Cookie"), SessionID: sid, Issued: s.issued[sid],
	})
}

// Requests are the credentials of every request the server got so far.
func (s *TokenServer) Requests() []Credentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Credentials(nil), s.requests...)
}

// sessionRecorder notes the session ids the server issues, as its
// answer's header is written: before the client can send one back.
type sessionRecorder struct {
	http.ResponseWriter
	s     *TokenServer
	wrote bool
}

func (w *sessionRecorder) WriteHeader(status int) {
	if !w.wrote {
		w.wrote = true
		if sid := w.Header().Get("Mcp-Session-Id"); sid != "" {
			w.s.mu.Lock()
			w.s.issued[sid] = true
			w.s.mu.Unlock()
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *sessionRecorder) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *sessionRecorder) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *sessionRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func whoami(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var id Identity
	if req.Extra != nil && req.Extra.Header != nil {
		auth := req.Extra.Header.Get("Authorization")
		id.Bearer, id.APIKey = auth != "", req.Extra.Header.Get("X-Api-Key")
		if token, ok := strings.CutPrefix(auth, "Bearer "); ok {
			id = claimsOfJWT(token, id)
		}
	}
	text, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
}

// claimsOfJWT fills id with the claims of token's payload, unverified.
func claimsOfJWT(token string, id Identity) Identity {
	var claims struct {
		Aud      any            `json:"aud"`
		Sub      string         `json:"sub"`
		ClientID string         `json:"client_id"`
		Scope    string         `json:"scope"`
		Act      map[string]any `json:"act"`
	}
	if Claims(token, &claims) != nil {
		return id
	}
	switch aud := claims.Aud.(type) {
	case string:
		id.Aud = []string{aud}
	case []any:
		for _, a := range aud {
			if s, ok := a.(string); ok {
				id.Aud = append(id.Aud, s)
			}
		}
	}
	id.Sub, id.ClientID, id.Scope, id.Act = claims.Sub, claims.ClientID, claims.Scope, claims.Act
	return id
}

// Claims decodes the payload of the JWT token into v, without checking
// its signature (the test holds its issuer, and the gateway checked it).
func Claims(token string, v any) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	return json.Unmarshal(payload, v)
}
