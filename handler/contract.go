package handler

import (
	"encoding/hex"
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/contract"
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

// contractLists holds the live lists compared with each lockfile, by the
// lockfile's digest, across config reloads: clients list tools once, and
// a reload must not forget what changed. Each handler with a contract
// takes its lockfile's entry in Provision and gives it back in Cleanup:
// the entry goes with the last config that uses the lockfile.
var contractLists = caddy.NewUsagePool()

// lockedContract is a handler's lockfile, and the lists compared with it.
type lockedContract struct {
	file  *contract.Lockfile
	key   string
	lists *contract.Lists
}

// lockContract reads the lockfile and takes the lists compared with it;
// Cleanup gives them back.
func (h *Handler) lockContract() error {
	l, err := contract.Load(h.Contract.File)
	if err != nil {
		return err
	}
	digest, err := l.Digest()
	if err != nil {
		return err
	}
	key := hex.EncodeToString(digest[:])
	v, _, err := contractLists.LoadOrNew(key, func() (caddy.Destructor, error) { return contract.NewLists(), nil })
	if err != nil {
		return err
	}
	h.locked = &lockedContract{file: l, key: key, lists: v.(*contract.Lists)}
	return nil
}

// unlockContract gives back the lists lockContract took.
func (h *Handler) unlockContract() {
	if h.locked != nil {
		_, _ = contractLists.Delete(h.locked.key)
	}
}
