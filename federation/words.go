package federation

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// The words of federation's answers, as the model reads them.

// unknownName: no server has a tool (or prompt) of that name, nor one a
// client would confuse with it.
func unknownName(what, name string, nearest []string) envelope.Envelope {
	b := envelope.New(envelope.UnknownAction, fmt.Sprintf(`No server behind this endpoint has a %s named "%s"`, what, feature.Clip(name))).
		Suggest("Call one of the available " + what + "s by its exact name, or list them again.")
	if len(nearest) > 0 {
		b = b.Actions(nearest...)
	}
	return b.Envelope()
}

// namespaceMismatch: the name is a server's (prefixed with it, or one a
// client would confuse with an advertised one), but it is not the name
// the federation advertises it by.
func namespaceMismatch(what, name string, candidates []string) envelope.Envelope {
	recovery := "Call the " + what + " by one of the names listed in available_actions, exactly as written there."
	if len(candidates) == 1 {
		recovery = `Call it as "` + feature.Clip(candidates[0]) + `", exactly as written.`
	}
	b := envelope.New(envelope.HandoffNamespaceMismatch, fmt.Sprintf(`"%s" is not the name of a %s behind this endpoint: several servers stand behind it, and names are compared as clients would confuse them (letter case, Unicode look-alikes, a server's prefix)`, feature.Clip(name), what)).
		Suggest(recovery)
	if len(candidates) > 0 {
		b = b.Actions(candidates...)
	}
	return b.Envelope()
}

// unknownResource: no server lists the resource, nor a template it
// matches.
func unknownResource(uri string) envelope.Envelope {
	return envelope.New(envelope.NotFound, `No server behind this endpoint lists the resource "`+feature.Clip(uri)+`", nor a template it matches`).
		Suggest("List the resources and resource templates again, and read one of them by its exact URI.").
		Envelope()
}

// connecting: the session has no session with the server yet (it did
// not answer the client's initialize); the gateway is connecting it.
func connecting(server string, retryAfter time.Duration) envelope.Envelope {
	secs, _ := feature.InSeconds(retryAfter)
	return envelope.New(envelope.HandoffConnecting, `The server "`+server+`" behind this endpoint is being connected for this session`).
		Suggest("Call it again after " + strconv.FormatInt(secs, 10) + " seconds; the other servers' tools work meanwhile.").
		RetryAfter(float64(secs)).
		Envelope()
}

// noServer: no server answered the client's initialize (or
// server/discover).
func noServer(method string, servers int, retryAfter time.Duration) envelope.Envelope {
	secs, _ := feature.InSeconds(retryAfter)
	return envelope.New(envelope.HandoffUpstreamUnavailable, fmt.Sprintf("None of the %d servers behind this endpoint answered %s", servers, method)).
		Suggest("Try again after " + strconv.FormatInt(secs, 10) + " seconds; if it keeps failing, tell the user the tool servers are down.").
		RetryAfter(float64(secs)).
		Envelope()
}

// noCommonVersion: the servers that answered server/discover share no
// protocol version.
func noCommonVersion() envelope.Envelope {
	return envelope.New(envelope.InternalError, "The servers behind this endpoint share no protocol version: no client can speak to all of them").
		Suggest("Tell the user the servers behind this endpoint are of protocol versions that cannot be served together; do not retry.").
		Critical().
		Envelope()
}

// batchRefused: a batch could hold calls to several servers.
func batchRefused() envelope.Envelope {
	return envelope.New(envelope.ValidationError, "This endpoint federates several servers, and takes one JSON-RPC message per request, not a batch").
		Suggest("Send each message in a request of its own.").
		Envelope()
}

// Words are federation's envelopes, with an example's values.
func Words() []feature.Word {
	return []feature.Word{
		{Name: "federation: a name no server has", Envelope: unknownName("tool", "serch", []string{"search"})},
		{Name: "federation: a name that is not the one advertised", Envelope: namespaceMismatch("tool", "github__serch", []string{"github__search"})},
		{Name: "federation: a resource no server lists", Envelope: unknownResource("file:///nowhere")},
		{Name: "federation: a server not connected yet", Envelope: connecting("github", 2*time.Second)},
		{Name: "federation: no server answered initialize", Envelope: noServer("initialize", 3, 2*time.Second)},
		{Name: "federation: a batch", Envelope: batchRefused()},
		{Name: "federation: servers that share no protocol version", Envelope: noCommonVersion()},
	}
}
