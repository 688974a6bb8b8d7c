package handler

import (
	"testing"

	"github.com/caddymcp/caddy-mcp/internal/answer/answertest"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/stretchr/testify/require"
)

// The shared fixtures (package answertest), by the names these tests use.
const (
	callOne   = answertest.CallOne
	resultOne = answertest.ResultOne
	progress  = answertest.Progress
)

type (
	sseEvent = answertest.Event
	tape     = answertest.Tape
)

var (
	sseClient  = answertest.ClientEvents
	messagesOf = answertest.MessagesOf
	dataOf     = answertest.DataOf
)

type (
	brokenClient   = answertest.BrokenClient
	lockedRecorder = answertest.LockedRecorder
)

var (
	errBrokenPipe  = answertest.ErrBrokenPipe
	members        = answertest.Members
	toolError      = answertest.ToolError
	decodeRPCError = answertest.RPCError
)

type (
	recordingHook = answertest.Hook
	hookOpener    = answertest.Opener
)

var recoveredAt = answertest.RecoveredAt

// parsed is what inspect learns of a body: its messages.
func parsed(t testing.TB, body string) []jsonrpc.Message {
	t.Helper()
	msgs, _, err := jsonrpc.Parse([]byte(body), nil, 1<<20)
	require.NoError(t, err, "%s", body)
	return msgs
}
