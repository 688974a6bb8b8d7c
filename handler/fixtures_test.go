package handler

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/answer/answertest"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/panics/panicstest"
)

// The fixtures shared with the tests of the answer reader (package
// answertest), by the names these tests use.
const (
	callOne   = answertest.CallOne
	resultOne = answertest.ResultOne
	progress  = answertest.Progress
)

type (
	tape          = answertest.Tape
	brokenClient  = answertest.BrokenClient
	recordingHook = answertest.Hook
	hookOpener    = answertest.Opener
)

var (
	sseClient      = answertest.ClientEvents
	messagesOf     = answertest.MessagesOf
	errBrokenPipe  = answertest.ErrBrokenPipe
	members        = answertest.Members
	toolError      = answertest.ToolError
	decodeRPCError = answertest.RPCError
	recoveredAt    = panicstest.RecoveredAt
)

// parsed is what inspect learns of a body: its messages.
func parsed(t testing.TB, body string) []jsonrpc.Message {
	t.Helper()
	msgs, _, err := jsonrpc.Parse([]byte(body), nil, 1<<20)
	require.NoError(t, err, "%s", body)
	return msgs
}
