package mcptest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// AuthServer is a real OAuth 2.1 authorization server (panva/oidc-provider,
// test/authserver/server.mjs) on a loopback port: client credentials,
// resource indicators (RFC 8707), JWT access tokens (RFC 9068) signed with
// ES256, or opaque ones, introspection, and token exchange (RFC 8693) if
// its config's Exchange says so. It is stopped by t.Cleanup.
type AuthServer struct {
	// Issuer is its issuer identifier, "http://127.0.0.1:PORT".
	Issuer string
	cfg    AuthServerConfig
	// ln is its listener, held by the test process from the start and
	// handed to each server process it starts: no other socket can take
	// its port meanwhile, even while the server restarts (Rotate).
	ln    *net.TCPListener
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// AuthServerConfig is what an AuthServer issues tokens for.
type AuthServerConfig struct {
	Clients   []AuthClient            `json:"clients"`
	Resources map[string]AuthResource `json:"resources"`
	// DefaultResource is the resource of a token requested without one.
	DefaultResource string `json:"defaultResource,omitempty"`
	// Exchange, if set, has the server perform token exchange for the
	// clients whose GrantTypes include TokenExchangeGrant.
	Exchange *AuthExchange `json:"exchange,omitempty"`
}

// AuthClient is a confidential client allowed the client credentials
// grant for scopes, or the grants GrantTypes names.
type AuthClient struct {
	ID     string `json:"client_id"`
	Secret string `json:"client_secret"`
	Scope  string `json:"scope"`
	// GrantTypes are the grants it may use (default client_credentials).
	GrantTypes []string `json:"grant_types,omitempty"`
	// AuthMethod is how it authenticates at the token endpoint:
	// client_secret_basic (the default), client_secret_post, or
	// private_key_jwt, signing with a key of JWKS (public keys).
	AuthMethod string              `json:"token_endpoint_auth_method,omitempty"`
	JWKS       *jose.JSONWebKeySet `json:"jwks,omitempty"`
}

// AuthResource is a resource server: the scopes a token for it may carry,
// and how its tokens are written.
type AuthResource struct {
	Scope  string `json:"scope"`
	Opaque bool   `json:"opaque,omitempty"`
	// TTL is its tokens' lifetime in seconds (default 3600).
	TTL int `json:"ttl,omitempty"`
}

// NewAuthServer opens the loopback listener of an authorization server,
// so that its Issuer is known before what it issues for is (a gateway's
// address); Start runs it.
func NewAuthServer(t testing.TB) *AuthServer {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("mcptest: listen: %v", err)
	}
	a := &AuthServer{ln: ln, Issuer: "http://" + ln.Addr().String()}
	t.Cleanup(func() {
		a.stop(t)
		_ = ln.Close()
	})
	return a
}

// Start runs the server, issuing for cfg and signing with a new key named
// kid.
func (a *AuthServer) Start(t testing.TB, cfg AuthServerConfig, kid string) {
	t.Helper()
	a.cfg = cfg
	a.start(t, kid)
}

// Rotate restarts the server on the same address with a new key, kid, in
// place of the old one: tokens it signed before no longer verify.
func (a *AuthServer) Rotate(t testing.TB, kid string) {
	t.Helper()
	a.stop(t)
	a.start(t, kid)
}

func (a *AuthServer) start(t testing.TB, kid string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk := jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
	cfg := struct {
		AuthServerConfig
		FD   int                `json:"fd"`
		Keys jose.JSONWebKeySet `json:"keys"`
	}{a.cfg, 3, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk}}}
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(RepoRoot(t), "test", "authserver")
	cmd := exec.Command("node", "server.mjs", string(arg))
	cmd.Dir = dir
	var logs lockedBuffer
	cmd.Stderr = &logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// The server stops when its stdin closes: if the test process dies,
	// so does the server.
	if a.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	listener, err := a.ln.File() // the child's fd 3
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{listener}
	err = cmd.Start()
	_ = listener.Close() // the child holds its own
	if err != nil {
		t.Fatalf("mcptest: starting the authorization server (npm ci --prefix test/authserver): %v", err)
	}
	a.cmd = cmd
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line := <-ready:
		if issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "ready "); !ok || issuer != a.Issuer {
			t.Fatalf("mcptest: the authorization server did not start at %s: %q\n%s", a.Issuer, line, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("mcptest: the authorization server did not start in 30s\n%s", logs.String())
	}
}

func (a *AuthServer) stop(t testing.TB) {
	if a.cmd == nil {
		return
	}
	_ = a.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-done
	}
	a.cmd = nil
}

// Token obtains an access token with the client credentials grant, for
// resource ("" for the default) with scope ("" for the client's).
func (a *AuthServer) Token(t testing.TB, client AuthClient, resource, scope string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if resource != "" {
		form.Set("resource", resource)
	}
	if scope != "" {
		form.Set("scope", scope)
	}
	req, err := http.NewRequest(http.MethodPost, a.Issuer+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client.ID, client.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.AccessToken == "" {
		t.Fatalf("mcptest: no token from the authorization server (%d): %v %q", resp.StatusCode, err, body.Error)
	}
	return body.AccessToken
}
