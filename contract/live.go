package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/toolschema"
	"github.com/caddymcp/caddy-mcp/validate"
)

// The contract at work in the gateway: every tools/list answer passing
// through is compared with the lockfile. A change is logged and counted;
// the gateway's error answers for a changed tool (a <validation_error>, an
// envelope for an upstream failure) carry a <contract_awareness> section
// listing up to five BREAKING and RISKY changes, so that a model that
// learned the approved contract sees what changed in the same turn; and
// under on_breaking refuse, a call to a tool with a BREAKING change is
// refused.

// Live is the contract at work for one handler: a feature.Responder that
// compares each tools/list answer, as the upstream wrote it, with the
// lockfile, and a feature.Check that refuses calls to broken tools.
type Live struct {
	locked []Tool
	refuse bool
	lists  *Lists
	// tools says which list a request's tools come from.
	tools  *validate.Feature
	logger *zap.Logger
}

// Lists are the live lists compared with one lockfile, per list key: their
// pages gathered until complete, and then their changes. Whoever holds
// them keeps them across config reloads (clients list tools once, and a
// reload must not forget what changed).
type Lists struct {
	mu sync.Mutex
	m  map[toolschema.ListKey]*liveList
}

// NewLists returns empty lists.
func NewLists() *Lists { return &Lists{m: make(map[toolschema.ListKey]*liveList)} }

// Destruct lets the lists go (caddy.Destructor).
func (*Lists) Destruct() error { return nil }

type liveList struct {
	// started: the first page of the listing under way was seen; over:
	// its pages held more than toolschema.MaxTools tools.
	started, over bool
	pending       []Tool
	// compared: a whole list was compared with the lockfile, and deltas
	// are its changes (none when it matches).
	compared bool
	deltas   []Delta
	// seen is the last drift logged, so that each is logged once.
	seen string
}

// maxLists bounds the lists compared with one lockfile (one more evicts an
// arbitrary one).
const maxLists = 1000

// Digest identifies a lockfile's content among the process's: the lists
// compared with it are kept under it.
func (l *Lockfile) Digest() ([32]byte, error) {
	b, err := l.Marshal()
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// NewLive puts the lockfile l to work, comparing with it the lists kept in
// lists, keyed as tools keys them; refuse is on_breaking refuse.
func NewLive(l *Lockfile, refuse bool, lists *Lists, tools *validate.Feature, logger *zap.Logger) *Live {
	return &Live{locked: l.Tools, refuse: refuse, lists: lists, tools: tools, logger: logger}
}

// Refuses reports whether calls to broken tools are refused.
func (s *Live) Refuses() bool { return s.refuse }

// Governs reports whether the contract decides which calls run: under
// on_breaking refuse (feature.Governing).
func (s *Live) Governs() bool { return s.refuse }

// Open opens the hook on the answer to a tools/list: its tools, as the
// upstream wrote them, are compared with the lockfile.
func (s *Live) Open(x *feature.Exchange) feature.Hook {
	if l, ok := s.tools.ListingOf(x); ok {
		return &validate.Learner{Listing: l, Learn: func(l validate.Listing, result []byte) { s.learn(l.Key, result, l.First) }}
	}
	return nil
}

// Check refuses a call to a tool whose contract broke, under on_breaking
// refuse; a batch holding one is refused whole.
func (s *Live) Check(x *feature.Exchange) *feature.Refusal {
	for i := range x.Messages {
		m := &x.Messages[i]
		if !feature.IsCall(m) {
			continue
		}
		breaking := s.breaking(x, string(m.Name))
		switch {
		case breaking == nil:
		case x.Batch || len(x.Messages) != 1:
			return &feature.Refusal{Envelope: brokenInBatch(string(m.Name), breaking), Status: http.StatusOK}
		default:
			return &feature.Refusal{Envelope: broken(string(m.Name), breaking), Status: http.StatusOK}
		}
	}
	return nil
}

// breaking are the breaking changes of tool, when calls to it are refused
// for them; nil otherwise.
func (s *Live) breaking(x *feature.Exchange, tool string) []string {
	if !s.refuse {
		return nil
	}
	deltas := s.deltas(s.tools.KeyOf(x), tool)
	if Worst(deltas) != Breaking {
		return nil
	}
	var breaking []string
	for _, d := range deltas {
		if d.Severity == Breaking {
			breaking = append(breaking, d.What)
		}
	}
	slices.Sort(breaking)
	return breaking
}

// Annotate is the <contract_awareness> section for a call's tool, ""
// when there is nothing to say (feature.Annotator).
func (s *Live) Annotate(x *feature.Exchange, tool string) string {
	return Awareness(tool, s.deltas(s.tools.KeyOf(x), tool))
}

// certain reports whether encoding/json reads a tools/list result as the
// servers' own readers do: none of the members it reads is given twice or
// under another letter case, in the result or in any of its tools.
func certain(result []byte) bool {
	tools, ok := exactMembers(result, "tools", "nextCursor", "cacheScope")
	if !ok || tools == nil || bytes.TrimSpace(tools)[0] != '[' {
		return ok
	}
	w := jsonrpc.NewWalker(tools)
	err := w.Array(func() error {
		start := w.Pos()
		if err := w.Skip(); err != nil {
			return err
		}
		if tool := tools[start:w.Offset()]; tool[0] == '{' {
			if _, ok := exactMembers(tool, "name", "description", "inputSchema"); !ok {
				return jsonrpc.ErrUncertain
			}
		}
		return nil
	})
	return err == nil
}

// exactMembers reports whether the object obj gives each of names at most
// once and only as written, and returns the value of the first name.
func exactMembers(obj []byte, names ...string) (first []byte, ok bool) {
	seen := make([]bool, len(names))
	ok = true
	err := jsonrpc.Members(obj, func(m jsonrpc.Member) bool {
		for i, name := range names {
			if !bytes.EqualFold(m.Key, []byte(name)) {
				continue
			}
			if string(m.Key) != name || seen[i] {
				ok = false
				return false
			}
			seen[i] = true
			if i == 0 {
				first = obj[m.Start:m.End]
			}
		}
		return true
	})
	return first, ok && err == nil
}

// learn reads one tools/list page under key; once a listing is complete,
// it is compared with the lockfile.
func (s *Live) learn(key toolschema.ListKey, result []byte, first bool) {
	var res struct {
		Tools      []Tool  `json:"tools"`
		NextCursor *string `json:"nextCursor"`
		CacheScope string  `json:"cacheScope"`
	}
	if !certain(result) || json.Unmarshal(result, &res) != nil {
		return
	}
	if res.CacheScope == "public" {
		key.Scope = "" // as the catalog keeps it
	}
	last := res.NextCursor == nil || *res.NextCursor == ""
	s.lists.mu.Lock()
	defer s.lists.mu.Unlock()
	l := s.lists.m[key]
	if l == nil {
		if len(s.lists.m) >= maxLists {
			for k := range s.lists.m {
				delete(s.lists.m, k)
				break
			}
		}
		l = &liveList{}
		s.lists.m[key] = l
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
	l.compared, l.deltas = true, Diff(s.locked, l.pending)
	l.pending, l.started = nil, false
	s.logDrift(key, l)
}

// logDrift logs and counts a list's changes, once per set of changes.
func (s *Live) logDrift(key toolschema.ListKey, l *liveList) {
	var b strings.Builder
	counts := map[Severity]int{}
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
		changes.WithLabelValues(string(sev)).Add(float64(n))
	}
	changes := make([]string, 0, min(len(l.deltas), 20))
	for _, d := range l.deltas[:min(len(l.deltas), 20)] {
		changes = append(changes, string(d.Severity)+" "+feature.Clip(d.Tool)+": "+feature.Clip(d.What))
	}
	level := s.logger.Info
	if counts[Breaking] > 0 || counts[Risky] > 0 {
		level = s.logger.Warn
	}
	level("the tools listed differ from the contract",
		zap.String("endpoint", key.Endpoint), zap.Int("breaking", counts[Breaking]),
		zap.Int("risky", counts[Risky]), zap.Int("safe", counts[Safe]), zap.Strings("changes", changes))
}

// deltas are the changes of one tool in the list a request's tools come
// from (its own scope, then the public one).
func (s *Live) deltas(key toolschema.ListKey, tool string) []Delta {
	if s == nil {
		return nil
	}
	s.lists.mu.Lock()
	defer s.lists.mu.Unlock()
	for _, k := range []toolschema.ListKey{key, {Endpoint: key.Endpoint}} {
		if l := s.lists.m[k]; l != nil && l.compared {
			var out []Delta
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

// Collectors are the contract's metrics. They are the process's,
// registered with each config's registry, so that they survive reloads.
func Collectors() []prometheus.Collector { return []prometheus.Collector{changes} }

// changes counts the changes found between live lists and the contract,
// by severity, each set of changes of a list once.
var changes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "caddy", Subsystem: "mcp", Name: "contract_changes_total",
	Help: "Changes found between a tools/list answer and the contract's lockfile, by severity (BREAKING, RISKY, SAFE), each set of changes of a list counted once.",
}, []string{"severity"})
