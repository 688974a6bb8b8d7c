package results

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/internal/logsample"
	"github.com/caddymcp/caddy-mcp/internal/panics"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

// held is a call's answer, held to the budget: a response over it is
// refused (RESULT_TOO_LARGE). Without a call (id nil: a GET's stream,
// tool ""), every response is held to it.
type held struct {
	b      *Budgets
	tool   string
	budget int
	id     []byte
	// paging are the tool's arguments that page or limit, for the words.
	paging []string
}

// cutting is a call's answer held to the budget, a response over it cut
// to fit (feature.Cutter): the core gives it what it cannot hold.
type cutting struct{ *held }

// errOverBudget: the call's response is larger than its budget, and was
// not cut to fit.
type errOverBudget struct{ size int }

func (e errOverBudget) Error() string { return "the result is " + strconv.Itoa(e.size) + " bytes" }

func (h *held) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: h.budget, MaxEvent: h.budget, FailClosed: true}
}

// Message refuses the call's response when it is over the budget; every
// other message (progress, a server's request) passes.
func (h *held) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	if len(msg) <= h.budget || notTheCalls(msg, h.id) {
		return nil, nil
	}
	return nil, errOverBudget{size: len(msg)}
}

// replayed reports whether the answer held is a GET's stream, whose
// responses answer no request of its own.
func (h *held) replayed() bool { return h.id == nil }

// notTheCalls reports whether msg is certainly not the call's response: a
// notification or request of the server's, or a response no client takes
// for the call's (jsonrpc.MayAnswer). What cannot be read with certainty
// (an id given twice) is taken for the call's: a client could read it so.
func notTheCalls(msg, id []byte) bool {
	var m jsonrpc.Message
	batch, err := jsonrpc.Each(msg, func(x jsonrpc.Message) error { m = x; return nil })
	if err != nil || batch {
		return false
	}
	// Without a call (id nil), any response is the one held.
	return m.Kind == jsonrpc.Notification || m.Kind == jsonrpc.Request || (m.Kind == jsonrpc.Response && id != nil && !jsonrpc.MayAnswer(id, m.ID))
}

// Message cuts the call's response when it is over the budget.
func (c *cutting) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	if len(msg) <= c.budget || notTheCalls(msg, c.id) {
		return nil, nil
	}
	cut := newCut(c.held)
	cut.Write(msg)
	return cut.Close()
}

// Cut reads a response the core cannot hold.
func (c *cutting) Cut(*feature.Exchange) feature.Cut { return newCut(c.held) }

// Close is the response cut to fit, or errOverBudget when it cannot be:
// the hook's Unreadable then refuses it.
func (c *cut) Close() ([]byte, error) {
	out, err := c.close()
	if err == nil {
		c.h.over(actionTruncated, c.n)
	}
	return out, err
}

// Unreadable is RESULT_TOO_LARGE for a response over the budget, or one
// the gateway stopped reading at it.
func (h *held) Unreadable(_ *feature.Exchange, err error) envelope.Envelope {
	var (
		over     errOverBudget
		declared *feature.TooLargeError
		size     int
	)
	switch {
	case errors.As(err, &over):
		size = over.size
	case errors.Is(err, feature.ErrTooLarge):
		// Not read past the budget: its size is what the server declared,
		// if it did (0: it did not).
		if errors.As(err, &declared) && declared.Declared <= math.MaxInt {
			size = int(declared.Declared)
		}
	default:
		return unreadable(h.tool, err)
	}
	h.over(actionRefused, size)
	if h.replayed() {
		return replayedTooLarge(size, h.budget)
	}
	return tooLarge(h.tool, size, h.budget, h.paging)
}

func (h *held) End(*feature.Exchange, feature.Ending) {}

// overhead is the most a cut result takes beside its content: the
// response around it, and the warning before it.
func (h *held) overhead() int {
	const most = 1 << 62 // the widest size a warning can name
	return len(h.appendHead(nil, truncated(h.tool, most, most, most, h.budget, h.paging))) + len(`],"isError":false}}`)
}

// appendHead appends what comes before a cut result's content: the
// response, up to its content, and the warning, as the first block.
func (h *held) appendHead(dst []byte, warning envelope.Envelope) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, h.id...)
	dst = append(dst, `,"result":{"content":[`...)
	dst = envelope.AppendTextContent(dst, warning.Text())
	return append(dst, ',')
}

// replayedTool names, in the metric and the log, a result sent on a GET's
// stream, whose tool is not known.
const replayedTool = "(resumed stream)"

// The actions counted.
const (
	actionRefused   = "refused"
	actionTruncated = "truncated"
)

// over counts and logs a result over its budget, size bytes (0: more than
// the budget, not read further).
func (h *held) over(action string, size int) {
	tool := feature.Clip(h.tool)
	if h.replayed() {
		tool = replayedTool
	}
	h.b.labels.Observe(tool, func(label string) { overBudget.WithLabelValues(label, action).Inc() })
	if log, _ := h.b.logs.Note(tool, ""); log {
		h.b.logger.Warn("a tool's result is over its budget",
			zap.String("tool", tool), zap.Int("bytes", size), zap.Int("budget", h.budget), zap.String("action", action))
	}
}

// logEvery is the least time between two lines of one tool's results over
// their budget: the first is logged at once, the ones after it counted on
// one line a minute (every one is counted by the metric).
const logEvery = time.Minute

// maxLoggedTools bounds the tools whose lines are sampled apart; the others
// are counted together.
const maxLoggedTools = 100

// siteLogSample names the sampled log's timer, which logRepeated runs on,
// where it recovers.
const siteLogSample = "log_sample"

// logRepeated logs the results over their budget that were not logged.
func (b *Budgets) logRepeated(c logsample.Count[string]) {
	defer panics.Recover(b.logger, siteLogSample)
	tool := c.Kind
	if c.Overflow {
		tool = "(other tools)"
	}
	b.logger.Warn("more of a tool's results were over their budget",
		zap.String("tool", tool), zap.Int64("repeated", c.N))
}

// overBudget counts the results over their budget, by tool (the first
// MaxTools names a config's budgets see, then "_OTHER") and what was done:
// refused, or truncated. It is the process's, registered with each
// config's registry, so that its counts go on across reloads.
var overBudget = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "results_over_budget_total",
	Help: "Tool results over their budget, by tool (the first 100 names a config sees, then _OTHER) and action: refused (RESULT_TOO_LARGE), truncated (cut to fit) or paged (kept whole, previewed, read in pages).",
}, []string{"tool", "action"})

// MaxTools bounds the tool names the metric is labelled with, per config.
const MaxTools = 100

// ToolLabels are the tool names the metric is labelled with: the first
// MaxTools seen, every other one "_OTHER" (clients choose names, and each
// would be a series). A set belongs to a config, whose budgets share it:
// a reload starts a new one, and the old one is released with the old
// config, the series of the names no config labels any more deleted
// (toolUses): the series stay bounded however often configs are reloaded.
type ToolLabels = promreg.ConfigLabels

// toolUses are the names every config's set labels.
var toolUses = promreg.NewSharedLabels(func(tool string) {
	overBudget.DeletePartialMatch(prometheus.Labels{"tool": tool})
})

// NewToolLabels returns an empty set of MaxTools tool labels, which its
// config releases (Release) when it is cleaned up.
func NewToolLabels() *ToolLabels { return toolUses.ForConfig(MaxTools) }

// Collectors are the metrics of the budgets, for a config's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{overBudget, pageReads, pageBytes}
}
