package validate

import (
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// catalogs holds the tools learned from tools/list answers, one catalog
// shared by every handler that learns tools, for as long as a config uses
// it: kept across config reloads (clients list tools once, when they
// connect, and a reload must not leave their calls unchecked), and let go
// with the last config that learns tools. Lists are keyed by endpoint
// (host and path), so sites do not mix. Its bound is the largest
// max_catalog_size of the config loaded last.
var catalogs = caddy.NewUsagePool()

const catalogKey = "tools"

// sharedTools is the catalog as the pool holds it.
type sharedTools struct{ *toolschema.Catalog }

func (sharedTools) Destruct() error { return nil }

// takeCatalog takes the shared catalog; releaseCatalog gives it back.
func takeCatalog() (*toolschema.Catalog, error) {
	v, _, err := catalogs.LoadOrNew(catalogKey, func() (caddy.Destructor, error) {
		return sharedTools{toolschema.NewCatalog(0)}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(sharedTools).Catalog, nil
}

func releaseCatalog() { _, _ = catalogs.Delete(catalogKey) }

// liveCatalog is the shared catalog while a config uses it, nil otherwise:
// what the metrics read at scrape time.
func liveCatalog() *toolschema.Catalog {
	var c *toolschema.Catalog
	catalogs.Range(func(_, v any) bool {
		c = v.(sharedTools).Catalog
		return false
	})
	return c
}

// catalogBound is the largest max_catalog_size the handlers of one config
// gave so far (feature.Host.ShareInConfig): the bound of the catalog they
// all share.
type catalogBound struct {
	mu  sync.Mutex
	max int64
}

// boundKey is the config's catalogBound among what its handlers share.
const boundKey = "validate.max_catalog_size"

// record records a handler's max_catalog_size (0: none given), and
// returns the largest its config gave so far (0: none).
func (b *catalogBound) record(size int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.max = max(b.max, size)
	return b.max
}

// boundOf is the config's catalogBound.
func boundOf(h feature.Host) (*catalogBound, error) {
	v, err := h.ShareInConfig(boundKey, func() (any, error) { return new(catalogBound), nil })
	if err != nil {
		return nil, err
	}
	return v.(*catalogBound), nil
}
