package answer

import (
	"encoding/json"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/answer/answertest"
	"github.com/caddymcp/caddy-mcp/internal/failures"
	"github.com/caddymcp/caddy-mcp/internal/panics/panicstest"
)

// The shared fixtures (package answertest), by the names these tests use.
const (
	callOne   = answertest.CallOne
	resultOne = answertest.ResultOne
	progress  = answertest.Progress

	sessionEra = feature.SessionEra
)

type (
	sseEvent      = answertest.Event
	tape          = answertest.Tape
	brokenClient  = answertest.BrokenClient
	recordingHook = answertest.Hook
	hookOpener    = answertest.Opener
)

var (
	sseClient         = answertest.ClientEvents
	messagesOf        = answertest.MessagesOf
	dataOf            = answertest.DataOf
	newLockedRecorder = answertest.NewLockedRecorder
	members           = answertest.Members
	toolError         = answertest.ToolError
	decodeRPCError    = answertest.RPCError
	recoveredAt       = panicstest.RecoveredAt
)

// testCore is the core as a watch sees it, for one request.
type testCore struct{}

func (testCore) Unreadable(err error, id json.RawMessage) []byte {
	env := envelope.New(envelope.InternalError, err.Error()).Envelope()
	return env.AppendRPCError(nil, id, feature.SessionEra.RPCCode(&env))
}

func (testCore) UpstreamStatus(int) {}

func (testCore) Logger() *zap.Logger { return zap.NewNop() }

// testFailures words failures as a handler with the default
// upstream_retry_after does.
var testFailures = &failures.Failures{RetryAfter: failures.DefaultRetryAfter}
