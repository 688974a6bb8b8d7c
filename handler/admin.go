package handler

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddymcp/caddy-mcp/internal/configs"
	"github.com/caddymcp/caddy-mcp/internal/version"
)

func init() {
	caddy.RegisterModule(adminStatus{})
}

// adminStatus is the admin API's live view of every mcp handler:
// GET /mcp/status on Caddy's admin listener.
type adminStatus struct{}

// CaddyModule returns the Caddy module information.
func (adminStatus) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.mcp",
		New: func() caddy.Module { return new(adminStatus) },
	}
}

// Routes returns the admin routes.
func (adminStatus) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/mcp/status", Handler: caddy.AdminHandlerFunc(serveStatus)}}
}

// Status is the body of GET /mcp/status. Durations are written as Go
// durations, such as "1m", "2s" or "14.909ms".
type Status struct {
	// Version is caddy-mcp's version in this binary (package
	// internal/version).
	Version  string          `json:"version"`
	Handlers []HandlerStatus `json:"handlers"`
	// Routes are the states of the handlers of upstream routes that
	// report one, by handler name (mcp_credential: each server's
	// credential); absent when none does.
	Routes map[string][]any `json:"routes,omitempty"`
}

// HandlerStatus is one mcp handler's limits and guard.
type HandlerStatus struct {
	// Features are the features' sections, by name (concurrency: a
	// guard's settings and load); absent when none has one.
	Features map[string]any `json:"features,omitempty"`
}

func serveStatus(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("method not allowed")}
	}
	// Every live config's handlers: during a reload, the old config's and
	// the new one's, until the old one is cleaned up (package internal/configs).
	handlers := loads.Live()
	status := Status{Version: version.String(), Handlers: make([]HandlerStatus, 0, len(handlers)), Routes: configs.Sections.Live()}
	for _, h := range handlers {
		status.Handlers = append(status.Handlers, h.status())
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(status)
}

func (h *Handler) status() HandlerStatus {
	var s HandlerStatus
	for _, p := range h.pluggedStatus {
		if s.Features == nil {
			s.Features = make(map[string]any, len(h.pluggedStatus))
		}
		s.Features[p.name] = p.status()
	}
	return s
}

// Interface guards.
var _ caddy.AdminRouter = adminStatus{}
