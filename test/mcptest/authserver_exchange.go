package mcptest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// The token exchange grant (RFC 8693) and the token type of its subject
// and issued tokens.
const (
	TokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
	AccessTokenType    = "urn:ietf:params:oauth:token-type:access_token"
)

// AuthExchange is the token exchange policy of an AuthServer.
type AuthExchange struct {
	// Accept is the resource whose tokens it exchanges (a gateway's): a
	// subject token for another audience is refused (invalid_grant).
	Accept string `json:"accept"`
	// Deny is, for a subject, the resources it has not consented to: an
	// exchange for one of them is refused (access_denied).
	Deny map[string][]string `json:"deny,omitempty"`
	// Unchanged has the server answer an exchange with the subject token
	// itself, as a misbehaving issuer would.
	Unchanged bool `json:"unchanged,omitempty"`
}

// AuthStats counts what an AuthServer served since it started.
type AuthStats struct {
	// TokenRequests counts the requests to its token endpoint, refused
	// ones too.
	TokenRequests int `json:"token_requests"`
	// Exchanges counts the tokens it issued by token exchange, and
	// BySubject those for each subject.
	Exchanges int            `json:"exchanges"`
	BySubject map[string]int `json:"by_subject"`
}

// TokenEndpoint is the server's token endpoint.
func (a *AuthServer) TokenEndpoint() string { return a.Issuer + "/token" }

// UserToken is an access token for the user sub, issued to clientID, for
// resource with scope ("" for all of the resource's), as the server
// writes one once the user has signed in.
func (a *AuthServer) UserToken(t testing.TB, sub, clientID, scope, resource string) string {
	t.Helper()
	req := map[string]string{"sub": sub, "client_id": clientID, "resource": resource}
	if scope != "" {
		req["scope"] = scope
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(a.Issuer+"/test/token", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		AccessToken      string `json:"access_token"`
		ErrorDescription string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.AccessToken == "" {
		t.Fatalf("mcptest: no user token from the authorization server (%d): %v %q", resp.StatusCode, err, answer.ErrorDescription)
	}
	return answer.AccessToken
}

// Stats is what the server counted since it (re)started.
func (a *AuthServer) Stats(t testing.TB) AuthStats {
	t.Helper()
	resp, err := http.Get(a.Issuer + "/test/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats AuthStats
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("mcptest: no stats from the authorization server (%d): %v", resp.StatusCode, err)
	}
	return stats
}
