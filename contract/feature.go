package contract

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featurefile"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
	"github.com/caddymcp/caddy-mcp/validate"
)

func init() {
	caddy.RegisterModule(Feature{})
}

// Order is where the contract's check runs among the features
// (feature.Parts): after the tool policy's and the budgets', before
// validate's.
const Order = -44

// AnswerOrder is where its hooks read an answer: after the budgets', and
// before the tool policy filters a list, so that the list compared is the
// one the upstream wrote.
const AnswerOrder = -40

// Feature is the contract as a feature of the mcp handler: the module
// http.handlers.mcp.features.contract. It compares every tools/list answer
// passing through with a lockfile of the tools an operator approved
// (written by `caddy mcp-lock`). A change is logged and counted; the
// gateway's error answers for a changed tool (a <validation_error>, an
// envelope for an upstream failure) carry a <contract_awareness> section
// listing up to five BREAKING and RISKY changes, so that a model that
// learned the approved contract sees what changed in the same turn.
//
//	contract <file> {
//		on_breaking warn|refuse           # default warn
//	}
type Feature struct {
	// File is the lockfile.
	File string `json:"file"`
	// OnBreaking is what a call to a tool with a BREAKING change gets:
	// "warn" (it runs, and the change is logged) or "refuse" (the gateway
	// answers it with a FORBIDDEN envelope naming the changes). Default:
	// warn.
	OnBreaking string `json:"on_breaking,omitempty"`

	locked *Lockfile
	// key is the lockfile's entry in contractLists, and lists its
	// lists (nil: none taken).
	key   string
	lists *Lists
}

// CaddyModule returns the Caddy module information.
func (Feature) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  feature.Namespace + ".contract",
		New: func() caddy.Module { return new(Feature) },
	}
}

// Validate checks the settings.
func (f *Feature) Validate() error {
	if f.File == "" {
		return errors.New("file is required")
	}
	if f.OnBreaking != "" && f.OnBreaking != "warn" && f.OnBreaking != "refuse" {
		return fmt.Errorf("on_breaking %q: want warn or refuse", feature.Clip(f.OnBreaking))
	}
	return nil
}

// contractLists holds the live lists compared with each lockfile, by the
// lockfile's digest, across config reloads: clients list tools once, and
// a reload must not forget what changed. Each contract takes its
// lockfile's entry in Provision and gives it back in Cleanup: the entry
// goes with the last config that uses the lockfile.
var contractLists = caddy.NewUsagePool()

// Provision registers the contract's metrics, and the learned tools', with
// the config's registry, reads the lockfile and takes the lists compared
// with it.
func (f *Feature) Provision(ctx caddy.Context) error {
	if err := promreg.Register(ctx, append(Collectors(), validate.Collectors()...)...); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	l, err := Load(f.File)
	if err != nil {
		return err
	}
	digest, err := l.Digest()
	if err != nil {
		return err
	}
	key := hex.EncodeToString(digest[:])
	v, _, err := contractLists.LoadOrNew(key, func() (caddy.Destructor, error) { return NewLists(), nil })
	if err != nil {
		return err
	}
	f.locked, f.key, f.lists = l, key, v.(*Lists)
	return nil
}

// Parts puts the lockfile to work on the tools learned from the lists: the
// hooks that compare each list with it, what a refused call is told of
// its tool, and under on_breaking refuse, the check that refuses a call to
// a broken tool.
func (f *Feature) Parts(h feature.Host) (feature.Parts, error) {
	tools, err := validate.Shared(h)
	if err != nil {
		return feature.Parts{}, err
	}
	live := NewLive(f.locked, f.OnBreaking == "refuse", f.lists, tools, h.Logger())
	tools.AddAnnotator(live)
	parts := feature.Parts{Order: Order, AnswerOrder: AnswerOrder, Responder: live, Annotator: live}
	if live.Refuses() {
		parts.Check = live
	}
	return parts, nil
}

// Cleanup gives back the lists Provision took.
func (f *Feature) Cleanup() error {
	if f.lists != nil {
		_, _ = contractLists.Delete(f.key)
	}
	return nil
}

// UnmarshalCaddyfile reads contract <file> [{ on_breaking warn|refuse }].
func (f *Feature) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the subdirective's name
	if !d.NextArg() {
		return d.Errf("contract needs a lockfile: contract <file> (written by caddy mcp-lock)")
	}
	f.File = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "on_breaking":
			v, err := featurefile.OneArg(d)
			if err != nil {
				return err
			}
			f.OnBreaking = v
		default:
			return featurefile.Unrecognized(d, "contract", d.Val(), "on_breaking")
		}
	}
	if err := f.Validate(); err != nil {
		return d.Errf("contract: %v", err)
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner     = (*Feature)(nil)
	_ caddy.Validator       = (*Feature)(nil)
	_ caddy.CleanerUpper    = (*Feature)(nil)
	_ caddyfile.Unmarshaler = (*Feature)(nil)
	_ feature.Plugin        = (*Feature)(nil)
)
