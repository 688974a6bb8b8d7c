package credential

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parse(t *testing.T, input string) (*Handler, error) {
	t.Helper()
	h := new(Handler)
	return h, h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
}

// Every line of the directive reads into the handler's settings.
func TestTheDirectiveReadsEveryOption(t *testing.T) {
	h, err := parse(t, `mcp_credential token_exchange {
		issuer https://login.example.com/tenant/
		token_endpoint https://login.example.com/tenant/token
		client gw s3cret
		auth client_secret_post
		key /etc/gw.pem gw-1
		audience api://crm
		resource https://crm.internal
		scopes api://crm/.default offline
		subject_token_type urn:acme:token
		on_behalf_of
		timeout 3s
		cache 500 8MiB
		rate 20 40
	}`)
	require.NoError(t, err)
	assert.Equal(t, &Handler{Use: TokenExchange, Issuer: "https://login.example.com/tenant/", TokenEndpoint: "https://login.example.com/tenant/token",
		Client: Client{ID: "gw", Secret: "s3cret", Method: SecretPost, Key: "/etc/gw.pem", KeyID: "gw-1"}, Audience: "api://crm", Resource: "https://crm.internal",
		Scopes: []string{"api://crm/.default", "offline"}, SubjectTokenType: "urn:acme:token", OnBehalfOf: true, Timeout: h.Timeout,
		Cache: Cache{Tokens: 500, Bytes: 8 << 20}, Rate: 20, Burst: 40}, h)
	assert.EqualValues(t, 3e9, h.Timeout)

	h, err = parse(t, `mcp_credential header X-Api-Key {env.KEY}`)
	require.NoError(t, err)
	assert.Equal(t, &Handler{Use: Header, Name: "X-Api-Key", Value: "{env.KEY}"}, h)
}

// A line the directive does not know, or given twice, is refused, saying
// which.
func TestTheDirectiveRefusesWhatItDoesNotKnow(t *testing.T) {
	for input, want := range map[string]string{
		"mcp_credential":                                           "wrong argument count",
		"mcp_credential exchange":                                  `"exchange": not token_exchange`,
		"mcp_credential header X-Api-Key":                          "a header name and a value",
		"mcp_credential none extra":                                "wrong argument count",
		"mcp_credential none {\n issuer x\n}":                      "takes no block",
		"mcp_credential token_exchange {\n isser x\n}":             "isser",
		"mcp_credential token_exchange {\n issuer a\n issuer b\n}": "issuer",
		"mcp_credential token_exchange {\n cache 0\n}":             "not a positive number",
		"mcp_credential token_exchange {\n rate 1 x\n}":            "not a positive number",
	} {
		_, err := parse(t, input)
		assert.ErrorContains(t, err, want, input)
	}
}
