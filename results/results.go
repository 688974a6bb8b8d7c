// Package results holds each tool's result to a budget, so that a result
// larger than the agent's host accepts (Claude Code refuses one over
// 25,000 tokens) or its context can hold is answered with words the model
// can act on, rather than passed on to be refused, cut or paid for.
//
// A budget is in bytes of the JSON-RPC response the server writes, or in
// estimated tokens (bytes / 4: JSON's quoting and escapes make a text's
// bytes over four a little more than its tokens in English, so the
// estimate errs on the side of refusing). The answer is held to the
// budget and never more: past it, the gateway stops reading and answers
// RESULT_TOO_LARGE in the call's place; in an event stream, only the
// call's response is held to it (progress passes).
package results

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
)

// Config is the budgets of tools' results.
type Config struct {
	// Max is the budget of every tool's result, in bytes; 0: none.
	Max int64 `json:"max,omitempty"`
	// Tools are budgets by tool: the first rule whose glob matches the
	// tool's name is its own, in place of Max.
	Tools []Rule `json:"tools,omitempty"`
	// Tokens is a budget of every tool's result in estimated tokens (its
	// bytes / 4); the smaller of it and the tool's bytes applies.
	Tokens int64 `json:"tokens,omitempty"`
}

// Rule is the budget of the tools a glob matches, in bytes.
type Rule struct {
	Match string `json:"match"`
	Max   int64  `json:"max"`
}

// BytesPerToken is the estimate of a token's bytes.
const BytesPerToken = 4

// MaxBudget bounds a budget: past it, a result is held by the core's own
// bounds anyway.
const MaxBudget = 64 << 20

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.Max < 0 || c.Max > MaxBudget || c.Tokens < 0 || c.Tokens*BytesPerToken > MaxBudget {
		return fmt.Errorf("a budget is between 1 byte and %d MiB", MaxBudget>>20)
	}
	for _, r := range c.Tools {
		if r.Match == "" || r.Max <= 0 || r.Max > MaxBudget {
			return fmt.Errorf("results: max %q: a glob and a budget between 1 byte and %d MiB", r.Match, MaxBudget>>20)
		}
	}
	if c.Max == 0 && c.Tokens == 0 && len(c.Tools) == 0 {
		return errors.New("results: no budget: give max, a max per tool, or tokens")
	}
	return nil
}

// Budgets holds results to their budgets: a feature.Responder, and a
// feature.Check that refuses a batch of calls (their results are held to
// a budget only alone).
type Budgets struct {
	cfg   *Config
	globs []toolpolicy.Glob
}

// New returns the budgets of cfg, which must be valid.
func New(cfg *Config) *Budgets {
	b := &Budgets{cfg: cfg}
	for _, r := range cfg.Tools {
		b.globs = append(b.globs, toolpolicy.CompileGlob(r.Match))
	}
	return b
}

// Budget is tool's budget in bytes, and the rule it comes from (for the
// metric: a glob of the config, or "default"); 0 when it has none.
func (b *Budgets) Budget(tool string) (int, string) {
	budget, rule := b.cfg.Max, "default"
	for i, g := range b.globs {
		if g.Match(tool) {
			budget, rule = b.cfg.Tools[i].Max, b.cfg.Tools[i].Match
			break
		}
	}
	if t := b.cfg.Tokens * BytesPerToken; t > 0 && (budget == 0 || t < budget) {
		budget = t
		if rule == "default" {
			rule = "tokens"
		}
	}
	return int(budget), rule
}

// Check refuses a batch holding a call of a tool with a budget.
func (b *Budgets) Check(x *feature.Exchange) *feature.Refusal {
	if !x.Batch {
		return nil
	}
	for i := range x.Messages {
		if m := &x.Messages[i]; feature.IsCall(m) {
			if budget, _ := b.Budget(string(m.Name)); budget > 0 {
				return &feature.Refusal{Envelope: callInBatch(string(m.Name)), Status: 200}
			}
		}
	}
	return nil
}

// Open opens the hook holding the result of a call to its budget.
func (b *Budgets) Open(x *feature.Exchange) feature.Hook {
	m := x.Single()
	if m == nil || !feature.IsCall(m) {
		return nil
	}
	budget, rule := b.Budget(string(m.Name))
	if budget == 0 {
		return nil
	}
	return &held{tool: string(m.Name), rule: rule, budget: budget, id: m.ID}
}

// held is a call's answer, held to the budget.
type held struct {
	tool, rule string
	budget     int
	id         []byte
}

// errOverBudget: the call's response is larger than its budget.
type errOverBudget struct{ size int }

func (e errOverBudget) Error() string { return "the result is " + strconv.Itoa(e.size) + " bytes" }

func (h *held) Needs() feature.Needs {
	return feature.Needs{Edit: true, Max: h.budget, FailClosed: true}
}

// Message refuses the call's response when it is over the budget; every
// other message (progress, a server's request) passes.
func (h *held) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	if len(msg) <= h.budget || !jsonrpc.IsResponseTo(msg, h.id) {
		return nil, nil
	}
	return nil, errOverBudget{size: len(msg)}
}

// Unreadable is RESULT_TOO_LARGE for a response over the budget, or one
// the gateway stopped reading at it.
func (h *held) Unreadable(_ *feature.Exchange, err error) envelope.Envelope {
	var over errOverBudget
	switch {
	case errors.As(err, &over):
		return h.tooLarge(over.size)
	case errors.Is(err, feature.ErrTooLarge):
		return h.tooLarge(0)
	}
	return unreadable(h.tool, err)
}

func (h *held) End(*feature.Exchange, feature.Ending) {}

func (h *held) tooLarge(size int) envelope.Envelope {
	overBudget.WithLabelValues(h.rule).Inc()
	return tooLarge(h.tool, size, h.budget)
}

// overBudget counts the results refused for their size, by the rule that
// gave the budget (a glob of the config, "default" or "tokens": bounded).
var overBudget = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "results_over_budget_total",
	Help: "Tool results refused for being over their budget, by the rule that gave the budget (its glob, default, or tokens).",
}, []string{"rule"})

// Collectors are the metrics of the budgets, for a config's registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{overBudget} }
