// Package results holds each tool's result to a budget, so that a result
// larger than the agent's host accepts (Claude Code refuses one over
// 25,000 tokens) or its context can hold is answered with words the model
// can act on, rather than passed on to be refused, cut or paid for.
//
// A budget is in bytes of the JSON-RPC response the server writes, or in
// estimated tokens (bytes / 4: a little more than the tokens of English
// prose, but 0.6 of those of JSON and 0.4 of base64's, as measured in
// docs/configuration.md, "How far off bytes / 4 is"). The answer is held
// to the budget and never more: past it, the gateway stops reading and answers
// RESULT_TOO_LARGE in the call's place, or, for the tools whose results
// are cut (truncate), reads the rest as it passes, unheld, and answers
// with what fits (cut.go). In an event stream, only the call's response is
// held to it (progress passes). The cut reads a response as every reader
// of the gateway does, a member it reads given once and only as written,
// with a scanner of its own (scan.go says why).
package results

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/logsample"
	"github.com/caddymcp/caddy-mcp/resultstore"
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
	// Truncate are globs of the tools whose results are cut to their
	// budget rather than refused ("*": all).
	Truncate []string `json:"truncate,omitempty"`
	// Page are globs of the tools whose results, past their budget, are
	// kept whole in Store and answered with a preview and a link the
	// model reads page by page ("*": all). A tool both name pages.
	Page []string `json:"page,omitempty"`
	// Store is where those results are kept; required with Page.
	Store *StoreConfig `json:"store,omitempty"`
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
	for _, g := range append(c.Truncate[:len(c.Truncate):len(c.Truncate)], c.Page...) {
		if g == "" {
			return errors.New("results: truncate, page: an empty glob")
		}
	}
	if len(c.Page) > 0 || c.Store != nil {
		if err := c.Store.validate(len(c.Page) > 0); err != nil {
			return err
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
	cfg                *Config
	globs, cuts, keeps []toolpolicy.Glob
	// store keeps the results of the tools that page (nil: none page).
	store   *resultstore.Store
	schemas Schemas
	logger  *zap.Logger
	logs    *logsample.Sampler[string]
	// labels are the tool names the metric is labelled with, the
	// config's.
	labels *ToolLabels
}

// Schemas gives the names of a tool's arguments, as its learned input
// schema lists them (validate's catalog), for the recovery to name those
// that page or limit.
type Schemas interface {
	Arguments(x *feature.Exchange, tool string) []string
}

// New returns the budgets of cfg, which must be valid, logging to logger,
// and labelling the metric with labels: the set of the config they belong
// to, which every budgets of the config share (nil: a set of their own).
func New(cfg *Config, labels *ToolLabels, logger *zap.Logger) *Budgets {
	if labels == nil {
		labels = NewToolLabels()
	}
	b := &Budgets{cfg: cfg, logger: logger, labels: labels}
	for _, r := range cfg.Tools {
		b.globs = append(b.globs, toolpolicy.CompileGlob(r.Match))
	}
	for _, g := range cfg.Truncate {
		b.cuts = append(b.cuts, toolpolicy.CompileGlob(g))
	}
	for _, g := range cfg.Page {
		b.keeps = append(b.keeps, toolpolicy.CompileGlob(g))
	}
	b.logs = logsample.New(logEvery, maxLoggedTools, b.logRepeated)
	return b
}

// SetSchemas gives the budgets the tools' learned schemas.
func (b *Budgets) SetSchemas(s Schemas) { b.schemas = s }

// Stop stops the log sampler.
func (b *Budgets) Stop() { b.logs.Stop() }

// Budget is tool's budget in bytes, and the rule it comes from (a glob of
// the config, "default" or "tokens"); 0 when it has none.
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

// strictest is the smallest budget a tool's result has.
func (b *Budgets) strictest() int {
	least := b.cfg.Max
	for _, r := range b.cfg.Tools {
		if least == 0 || r.Max < least {
			least = r.Max
		}
	}
	if t := b.cfg.Tokens * BytesPerToken; t > 0 && (least == 0 || t < least) {
		least = t
	}
	return int(least)
}

// SetStore gives the budgets the store the results of the tools that page
// are kept in.
func (b *Budgets) SetStore(s *resultstore.Store) { b.store = s }

// truncates reports whether tool's results are cut rather than refused.
func (b *Budgets) truncates(tool string) bool { return matches(b.cuts, tool) }

// pages reports whether tool's results are kept whole and paged.
func (b *Budgets) pages(tool string) bool { return b.store != nil && matches(b.keeps, tool) }

func matches(globs []toolpolicy.Glob, tool string) bool {
	for _, g := range globs {
		if g.Match(tool) {
			return true
		}
	}
	return false
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

// Open opens the hook holding the result of a call to its budget: one
// that cuts it, for the tools truncate names. On a GET's stream, which
// replays what a POST's stream carried when a client resumes it (and on
// which a server may send any response), every response is held to the
// strictest budget: nothing there says which call, and so which tool, it
// answers.
func (b *Budgets) Open(x *feature.Exchange) feature.Hook {
	if x.Request.Method == "GET" {
		return &held{b: b, budget: b.strictest()}
	}
	m := x.Single()
	if m == nil || !feature.IsCall(m) {
		return nil
	}
	tool := string(m.Name)
	budget, _ := b.Budget(tool)
	if budget == 0 {
		return nil
	}
	h := &held{b: b, tool: tool, budget: budget, id: m.ID}
	if b.schemas != nil {
		h.paging = pagingArguments(b.schemas.Arguments(x, tool))
	}
	switch {
	case b.pages(tool):
		return &keeping{held: h, owner: ownerOf(x), ctx: x.Request.Context(), span: callSpan(x)}
	case b.truncates(tool):
		return &cutting{h}
	}
	return h
}
