package handler

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// Contract compares every tools/list answer passing through with a lockfile
// of the tools an operator approved (written by `caddy mcp-lock`). A change
// is logged and counted; the gateway's error answers for a changed tool
// (a <validation_error>, an envelope for an upstream failure) carry a
// <contract_awareness> section listing up to five BREAKING and RISKY
// changes, so that a model that learned the approved contract sees what
// changed in the same turn.
type Contract struct {
	// File is the lockfile.
	File string `json:"file"`
	// OnBreaking is what a call to a tool with a BREAKING change gets:
	// "warn" (it runs, and the change is logged) or "refuse" (the gateway
	// answers it with a FORBIDDEN envelope naming the changes). Default:
	// warn.
	OnBreaking string `json:"on_breaking,omitempty"`
}

// Validate checks the settings.
func (c *Contract) Validate() error {
	if c.File == "" {
		return fmt.Errorf("file is required")
	}
	if c.OnBreaking != "" && c.OnBreaking != "warn" && c.OnBreaking != "refuse" {
		return fmt.Errorf("on_breaking %q: want warn or refuse", clip(c.OnBreaking))
	}
	return nil
}

// contractState is a handler's contract at work: the lockfile, and the
// changes of each live list compared with it.
type contractState struct {
	locked []contract.Tool
	// lock identifies the lockfile's content among the process's.
	lock   [32]byte
	refuse bool
	logger *zap.Logger
}

// The live lists compared with each lockfile, per ListKey: their pages
// gathered until complete, and then their changes. They are the process's,
// kept across config reloads as the catalog is: clients list tools once,
// and a reload must not forget what changed.
var (
	contractMu    sync.Mutex
	contractLists = make(map[contractKey]*liveList)
)

type contractKey struct {
	lock [32]byte
	list toolschema.ListKey
}

type liveList struct {
	// started: the first page of the listing under way was seen; over:
	// its pages held more than toolschema.MaxTools tools.
	started, over bool
	pending       []contract.Tool
	// compared: a whole list was compared with the lockfile, and deltas
	// are its changes (none when it matches).
	compared bool
	deltas   []contract.Delta
	// seen is the last drift logged, so that each is logged once.
	seen string
}

// maxContractLists bounds the lists compared (one more evicts an arbitrary
// one).
const maxContractLists = 1000

func newContractState(c *Contract, logger *zap.Logger) (*contractState, error) {
	l, err := contract.Load(c.File)
	if err != nil {
		return nil, err
	}
	b, err := l.Marshal()
	if err != nil {
		return nil, err
	}
	return &contractState{locked: l.Tools, lock: sha256.Sum256(b), refuse: c.OnBreaking == "refuse", logger: logger}, nil
}

// learn reads one tools/list page under key; once a listing is complete,
// it is compared with the lockfile.
func (s *contractState) learn(key toolschema.ListKey, result []byte, first bool) {
	var res struct {
		Tools      []contract.Tool `json:"tools"`
		NextCursor *string         `json:"nextCursor"`
		CacheScope string          `json:"cacheScope"`
	}
	if json.Unmarshal(result, &res) != nil {
		return
	}
	if res.CacheScope == "public" {
		key.Scope = "" // as the catalog keeps it
	}
	last := res.NextCursor == nil || *res.NextCursor == ""
	contractMu.Lock()
	defer contractMu.Unlock()
	ck := contractKey{s.lock, key}
	l := contractLists[ck]
	if l == nil {
		if len(contractLists) >= maxContractLists {
			for k := range contractLists {
				delete(contractLists, k)
				break
			}
		}
		l = &liveList{}
		contractLists[ck] = l
	}
	if first {
		l.pending, l.started, l.over = nil, true, false
	}
	if !l.started {
		return // a page of a listing whose start this gateway did not see
	}
	if len(l.pending)+len(res.Tools) <= toolschema.MaxTools {
		l.pending = append(l.pending, res.Tools...)
	} else {
		l.pending, l.over = nil, true
	}
	if !last {
		return
	}
	if l.over {
		// Part of a list would read as tools removed: a list this long is
		// not compared, and nothing is told or refused for it.
		l.compared, l.deltas, l.started = false, nil, false
		s.logger.Warn("the tools listed are too many to compare with the contract: drift is not checked for this list",
			zap.String("endpoint", key.Endpoint), zap.Int("max_tools", toolschema.MaxTools))
		return
	}
	l.compared, l.deltas = true, contract.Diff(s.locked, l.pending)
	l.pending, l.started = nil, false
	s.logDrift(key, l)
}

// logDrift logs and counts a list's changes, once per set of changes.
func (s *contractState) logDrift(key toolschema.ListKey, l *liveList) {
	var b strings.Builder
	counts := map[contract.Severity]int{}
	for _, d := range l.deltas {
		counts[d.Severity]++
		b.WriteString(string(d.Severity) + " " + d.Tool + ": " + d.What + "\n")
	}
	if b.String() == l.seen {
		return
	}
	l.seen = b.String()
	if len(l.deltas) == 0 {
		s.logger.Info("the tools listed match the contract again", zap.String("endpoint", key.Endpoint))
		return
	}
	for sev, n := range counts {
		contractChanges.WithLabelValues(string(sev)).Add(float64(n))
	}
	changes := make([]string, 0, min(len(l.deltas), 20))
	for _, d := range l.deltas[:min(len(l.deltas), 20)] {
		changes = append(changes, string(d.Severity)+" "+clip(d.Tool)+": "+clip(d.What))
	}
	level := s.logger.Info
	if counts[contract.Breaking] > 0 || counts[contract.Risky] > 0 {
		level = s.logger.Warn
	}
	level("the tools listed differ from the contract",
		zap.String("endpoint", key.Endpoint), zap.Int("breaking", counts[contract.Breaking]),
		zap.Int("risky", counts[contract.Risky]), zap.Int("safe", counts[contract.Safe]), zap.Strings("changes", changes))
}

// deltas are the changes of one tool in the list a request's tools come
// from (its own scope, then the public one).
func (s *contractState) deltas(key toolschema.ListKey, tool string) []contract.Delta {
	if s == nil {
		return nil
	}
	contractMu.Lock()
	defer contractMu.Unlock()
	for _, k := range []toolschema.ListKey{key, {Endpoint: key.Endpoint}} {
		if l := contractLists[contractKey{s.lock, k}]; l != nil && l.compared {
			var out []contract.Delta
			for _, d := range l.deltas {
				if d.Tool == tool {
					out = append(out, d)
				}
			}
			return out
		}
	}
	return nil
}

// awareness is the <contract_awareness> section for a call's tool, "" when
// there is no contract or nothing to say.
func (h *Handler) awareness(x *feature.Exchange, tool string) string {
	if h.contract == nil {
		return ""
	}
	return contract.Awareness(tool, h.contract.deltas(h.validation.KeyOf(x), tool))
}

// refuseBroken reports whether a call to tool is refused, on_breaking
// being refuse and the tool's contract broken, and the breaking changes.
func (h *Handler) refuseBroken(x *feature.Exchange, tool string) (breaking []string, refused bool) {
	if h.contract == nil || !h.contract.refuse {
		return nil, false
	}
	deltas := h.contract.deltas(h.validation.KeyOf(x), tool)
	if contract.Worst(deltas) != contract.Breaking {
		return nil, false
	}
	for _, d := range deltas {
		if d.Severity == contract.Breaking {
			breaking = append(breaking, d.What)
		}
	}
	slices.Sort(breaking)
	return breaking, true
}

// appendCallResult appends the answer to a tools/call: the envelope as a
// CallToolResult, with the tool's <contract_awareness> as a second text
// block when there is one.
//
// The gateway's own capacity answers (RATE_LIMITED, SERVER_BUSY) carry
// none: they say nothing about the tool.
func (h *Handler) appendCallResult(dst []byte, x *exchange, env *envelope.Envelope, id json.RawMessage, tool string) []byte {
	var aw string
	if env.Code != envelope.RateLimited && env.Code != envelope.ServerBusy {
		aw = h.awareness(x.view(), tool)
	}
	if aw == "" {
		return env.AppendToolResult(dst, id)
	}
	return envelope.AppendTextResult(dst, id, env.IsError(), env.Text(), aw)
}

// contractChanges counts the changes found between live lists and the
// contract, by severity, each set of changes of a list once.
var contractChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "contract_changes_total",
	Help: "Changes found between a tools/list answer and the contract's lockfile, by severity (BREAKING, RISKY, SAFE), each set of changes of a list counted once.",
}, []string{"severity"})
