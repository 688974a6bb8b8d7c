package handler

import (
	"sync"
	"sync/atomic"

	"github.com/caddymcp/caddy-mcp/toolschema"
)

// catalog is the process's tools, shared by every handler that validates
// and kept across config reloads: clients list tools once, when they
// connect, and a reload must not leave their calls unchecked. Lists are
// keyed by endpoint (host and path), so sites do not mix. Its bound is
// the largest max_catalog_size of the config loaded last.
var (
	catalogOnce sync.Once
	catalog     atomic.Pointer[toolschema.Catalog]
)

func sharedCatalog() *toolschema.Catalog {
	catalogOnce.Do(func() { catalog.Store(toolschema.NewCatalog(0)) })
	return catalog.Load()
}
