// Package feature is the contract between the gateway's core (package
// handler) and its features: the tool policy, validate, the contract's
// comparison, and whatever comes next. It knows nothing of Caddy, so that
// a feature can be written and tested without it.
//
// On the way in, each Admitter takes what a request needs (a rate limit's
// tokens) and says how to give it back (an Undo), then each Check decides
// on it; either may refuse it (a Refusal the core writes, logs and
// counts). Once it is over, each Observer is told how it ended.
//
// On the way out, each Responder may open a Hook on the answer to a
// request. The core reads the answer as a sequence of JSON-RPC messages (a
// JSON body, or the data of each message event of a stream), once, and
// gives each message to the hooks in order, each seeing what the one
// before it let through. A hook says what it needs (Needs): to see the
// messages as they pass, or to hold them so that it may replace them,
// within a bound, failing closed or open past it. Once the answer is over
// the hook is told how it ended (Ending).
//
// The built-in features are plugged by the core; a feature from outside it
// is a Caddy guest module (Plugin, plugin.go) whose Parts the core runs
// with theirs. docs/architecture.md shows the steps in order, the order
// the features run in, and how to add one.
package feature

import (
	"errors"
	"net/http"
	"time"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// ClientSessionVar is the request variable (caddyhttp.GetVar) holding the
// session id the client sent, as it sent it, once a session phase
// (federation) put a server's own in the request's Mcp-Session-Id: what
// names the client's session to a feature that keys on it across servers
// (results' kept results).
const ClientSessionVar = "mcp.client_session"

// GatewayScheme begins the URIs the gateway serves itself (results'
// caddymcp://results/<id>): a feature's Answerer answers a request that
// names one, and no router sends it by what a server lists.
const GatewayScheme = "caddymcp://"

// Exchange is what a feature may read of one request. The core fills it
// step by step: the identity phase sees it before the body is read
// (Messages and Body are nil then), every later step once it has been
// read. Nothing in it may be changed but what a step is said to write
// (the identity phase its Principal, the session phase its Replica).
type Exchange struct {
	// Request is the HTTP request, as the client sent it.
	Request *http.Request
	// Messages are the JSON-RPC messages of a POST's body, in order; nil
	// for a GET, a DELETE, or a body that was not read. Their bytes point
	// into Body.
	Messages []jsonrpc.Message
	// Body is the POST's body as read (nil when it streams on to the
	// upstream as it arrives).
	Body []byte
	// Batch: the body is a JSON array of messages.
	Batch bool
	// Era is the protocol era the request declares.
	Era Era
	// Start is when the gateway received the request.
	Start time.Time
	// Replica is the upstream a session token pinned the request to, ""
	// when none did: written by the admitter of the session phase.
	Replica string
	// Server is the server of several behind the endpoint the request
	// goes to (federation's, by its configured name), "" when it goes to
	// the one upstream or to every server: written by the admitter of the
	// session phase.
	Server string
	// Path is the request's path as the client sent it, before any
	// handle_path stripped it.
	Path string
	// Principal is who the request's verified credential speaks for:
	// written by the identity phase (nil when none is configured).
	Principal *Principal
	// Replacer expands the request's placeholders.
	Replacer Replacer
}

// Single is the body's one message, nil when it holds none or several.
func (x *Exchange) Single() *jsonrpc.Message {
	if x.Batch || len(x.Messages) != 1 {
		return nil
	}
	return &x.Messages[0]
}

// IsCall reports whether m is a tools/call request, answered with a
// CallToolResult rather than a JSON-RPC error.
func IsCall(m *jsonrpc.Message) bool {
	return m.Kind == jsonrpc.Request && string(m.Method) == "tools/call"
}

// Needs is what a hook needs of an answer.
type Needs struct {
	// Edit: the hook may replace messages. A JSON answer is held whole
	// until it is complete, and each event of a stream until its end;
	// otherwise the hook sees each message as it passes (a JSON answer
	// once complete), and what it returns is not used.
	Edit bool
	// Max bounds the bytes of a JSON answer the hook reads; 0: it reads
	// none, only the events of a stream (each within the core's own
	// bound). An answer past it passes unread, or, with FailClosed, not
	// at all, unless the core holds it for another hook: a hook that
	// fails closed is then given it.
	Max int
	// MaxEvent raises the bound of an event's data the hook reads past
	// the core's own (1 MiB): events are held up to it.
	MaxEvent int
	// FailClosed: what the hook cannot read (an answer past Max, one that
	// is compressed, not JSON-RPC, or an event stream under a status other
	// than 200) is not sent: Unreadable's envelope takes its place.
	FailClosed bool
	// HeaderOnly: the hook reads no message at all, only the answer's
	// header (a HeaderHook) and how it ended: the core reads nothing of
	// the answer for it.
	HeaderOnly bool
}

// Hook reads the upstream's answer to one request. A hook is opened per
// answer by its feature's Responder (which may give the same stateless hook
// to every answer), and is called by one goroutine at a time, with the
// exchange it was opened for.
type Hook interface {
	// Needs is what the hook needs of the answer.
	Needs() Needs
	// Message is given each JSON-RPC message of the answer, as the hooks
	// before it let it through: a JSON body whole, or the data of a
	// stream's message event. It returns what to send in its place (nil:
	// as it is), or an error when it cannot read it.
	Message(x *Exchange, msg []byte) ([]byte, error)
	// Unreadable is the envelope sent, for the request's id, in place of
	// what a hook that fails closed could not read, err saying why.
	Unreadable(x *Exchange, err error) envelope.Envelope
	// End is told how the answer ended, once.
	End(x *Exchange, e Ending)
}

// Ending is how an answer ended.
type Ending uint8

const (
	// Complete: the upstream finished its answer.
	Complete Ending = iota
	// Broken: the upstream broke its answer before its end.
	Broken
	// ClientGone: the client left before the answer's end.
	ClientGone
	// DeadlinePassed: the call's deadline cut it; the gateway answered
	// TIMEOUT.
	DeadlinePassed
	// Replaced: the gateway answered in the upstream's place: an error
	// page replaced by its envelope, an upstream that could not be
	// reached, an answer a hook could not read and failed closed on.
	Replaced
)

var endings = [...]string{"complete", "broken", "client_gone", "deadline_passed", "replaced"}

func (e Ending) String() string {
	if int(e) < len(endings) {
		return endings[e]
	}
	return "unknown"
}

// ErrTooLarge is what the error a hook's Unreadable is given wraps when
// the answer (or one of its events) outgrew what the hooks read: the core
// stopped reading it there. The error is a *TooLargeError.
var ErrTooLarge = errors.New("larger than the gateway reads")

// TooLargeError is an answer, or an event of one, that outgrew what the
// hooks read of it, in words of its own (errors.Is(err, ErrTooLarge)).
type TooLargeError struct {
	What string
	// Declared is the length the answer declared (its Content-Length),
	// when it declared one: the core stops at once at a length declared
	// past what it reads. 0 when it declared none.
	Declared int64
}

func (e *TooLargeError) Error() string      { return e.What }
func (*TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Cutter is a Hook that fails closed and answers itself for a message too
// large to hold (a result cut to its budget) rather than with Unreadable's
// envelope. When it is the first hook that fails closed and a message
// outgrows what the core holds, the core opens a Cut, gives it what it
// held of the message and then the rest as it comes, unheld, and sends
// what the Cut's Close returns in the message's place, given to the hooks
// as a message of its own.
type Cutter interface {
	Hook
	Cut(x *Exchange) Cut
}

// Cut reads the rest of a message too large to hold, in pieces.
type Cut interface {
	// Write is given the next piece, which it may not keep (it copies
	// what it keeps). It reports whether it reads more: once it does not,
	// it gave up cutting the message; the core stops reading the answer
	// there, tells the upstream to stop the request, and answers
	// Unreadable, for Close's error.
	Write(p []byte) (more bool)
	// Close is called once, when the message ended: it returns what to
	// send in its place, or an error for Unreadable's envelope.
	Close() ([]byte, error)
}

// Responder opens hooks on the upstream's answers.
type Responder interface {
	// Open returns the hook that reads the answer to x, nil when the
	// feature has no say in it. It is called before the request goes
	// upstream.
	Open(x *Exchange) Hook
}

// Check is a feature's decision on a request on its way in. Checks run
// once the body is read, the session opened and the admitters (the rate
// limits) have taken what they take (a refused call still costs it), and
// before the concurrency guard gives places, in the order the features
// are configured; the first refusal answers the request.
type Check interface {
	// Check refuses the request, or lets it go on (nil).
	Check(x *Exchange) *Refusal
}

// Governing is implemented by a check that decides which calls run (a
// hidden tool, a broken contract) whatever their arguments say, as
// opposed to one that checks what it can read and lets the rest pass
// (validate). While one governs, a body the core cannot read is refused
// rather than passed to the upstream: it could carry a call the check
// would refuse.
type Governing interface {
	Governs() bool
}

// WholeBody is implemented by a check that reads a call's whole body (its
// arguments), or an admitter whose taking must not wait for a body that
// trickles in (a guard's place): while one does, a body is read whole
// before the checks run, never streamed to the upstream as it arrives.
type WholeBody interface {
	ReadsWholeBody() bool
}

// Annotator is implemented by a feature with something to tell the model
// about a tool beside the gateway's own answers to a call to it: a section
// of its own, in a text block after the envelope's (the contract's
// <contract_awareness>). The gateway's capacity answers (RATE_LIMITED,
// SERVER_BUSY) carry none: they say nothing about the tool.
type Annotator interface {
	// Annotate is the section for tool, "" when there is nothing to say.
	Annotate(x *Exchange, tool string) string
}

// Refusal is a check's answer in place of the upstream's.
type Refusal struct {
	// Envelope is what the model reads. The core writes it in the form
	// each request of the body needs (a CallToolResult for a tools/call,
	// a JSON-RPC error otherwise), unless Body is set.
	Envelope envelope.Envelope
	// Status is the HTTP status of an answer that carries no request's
	// id (a notification's, or one refused before its body was read); a
	// request's answer is a 200.
	Status int
	// Header is set on the answer, whatever its form (the challenge of a
	// 401: WWW-Authenticate).
	Header http.Header
	// Body, when set, is the whole answer, sent with status 200: a
	// CallToolResult saying more than the envelope (the envelope is what
	// the log and the metrics record).
	Body []byte
	// By is the rule that refused, when the refusal is a rule's (a rate
	// limit's, a guard's) rather than a judgment on what the request says.
	By Rule
	// Cause is the error behind the refusal, for the log.
	Cause error
	// Gone: nobody is left to answer, the client having left while its
	// request waited to be admitted (Cause says so). The core writes
	// nothing.
	Gone bool
	// Plain, when set, is an answer that is no envelope, written as it
	// is (Envelope is then not used).
	Plain *Plain
}

// Plain is an answer that is no envelope: a JSON-RPC error the client's
// SDK acts on by itself (HTTP 404 for a session not found, which tells it
// to initialize a new session; 403 insufficient_scope, which tells it to
// ask for a scope). The core writes it with Status, Header and Body, as
// application/json, and records Outcome as the request's outcome (the
// metrics, {http.mcp.error_code}); the feature logs it, if it must.
type Plain struct {
	Status  int
	Header  http.Header
	Body    []byte
	Outcome string
}

// Word is an envelope a feature writes, built with an example's values:
// each feature lists its words (a Words function), so that every envelope
// the gateway can write is reviewed in one place
// (handler/testdata/words.golden).
type Word struct {
	Name     string
	Envelope envelope.Envelope
}
