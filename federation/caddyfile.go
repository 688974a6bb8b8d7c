package federation

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddymcp/caddy-mcp/feature/featurefile"
)

func init() {
	featurefile.Register("server", featurefile.Subdirective{Read: readServer, Repeats: true})
	featurefile.Register("federation", featurefile.Subdirective{
		Read: readFederation,
		Words: map[string][]string{"federation": {
			"separator", "list_timeout", "max_list_size", "max_list_items", "page_size", "rename", "pins", "secret", "session_ttl",
		}},
	})
}

// featureOf is the federation the mcp block configures.
func featureOf(a *featurefile.Adaptation) *Feature {
	return a.Feature("federation", func() any { return new(Feature) }).(*Feature)
}

// readServer reads
//
//	server <name> {
//		<directives>
//	}
//
// whose block is read as a site's directives: the server's own route.
func readServer(d *caddyfile.Dispenser, a *featurefile.Adaptation) error {
	f := featureOf(a)
	name, err := featurefile.OneArg(d)
	if err != nil {
		return err
	}
	if !serverName.MatchString(name) {
		return d.Errf("server name %q: want 1 to 32 letters, digits, _ or -", name)
	}
	for _, s := range f.Servers {
		if s.Name == name {
			return d.Errf("server %q is named twice", name)
		}
	}
	at := featurefile.At(d)
	raw, err := a.Routes(d)
	if err != nil {
		return err
	}
	s := Server{Name: name}
	if err := json.Unmarshal(raw, &s.Routes); err != nil {
		return featurefile.ErrAt(at, fmt.Errorf("server %q: %w", name, err))
	}
	if len(s.Routes) == 0 {
		return featurefile.ErrAt(at, fmt.Errorf("server %q: its block holds no directive: give it a reverse_proxy", name))
	}
	f.Servers = append(f.Servers, s)
	return nil
}

// readFederation reads the federation block.
func readFederation(d *caddyfile.Dispenser, a *featurefile.Adaptation) error {
	f := featureOf(a)
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if sub != "rename" {
			if err := featurefile.Once(d, "federation", seen); err != nil {
				return err
			}
		}
		var err error
		switch sub {
		case "separator":
			f.Separator, err = featurefile.OneArg(d)
		case "list_timeout":
			f.ListTimeout, err = featurefile.PositiveDuration(d)
		case "max_list_size":
			f.MaxListSize, err = featurefile.Size(d)
		case "max_list_items":
			f.MaxListItems, err = featurefile.PositiveInt(d)
		case "page_size":
			f.PageSize, err = featurefile.PositiveInt(d)
		case "pins":
			f.Pins, err = featurefile.OneArg(d)
		case "secret":
			f.Secrets, err = featurefile.ManyArgs(d)
		case "session_ttl":
			f.SessionTTL, err = featurefile.PositiveDuration(d)
		case "rename":
			err = readRename(d, f)
		default:
			return featurefile.Unrecognized(d, "federation", sub)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readRename reads rename <server> <name> <as>. The server must be named
// by a server block before it.
func readRename(d *caddyfile.Dispenser, f *Feature) error {
	args := d.RemainingArgs()
	if len(args) != 3 {
		return d.Errf("rename: want <server> <name> <as>, got %d values", len(args))
	}
	for i := range f.Servers {
		s := &f.Servers[i]
		if s.Name != args[0] {
			continue
		}
		if s.Rename == nil {
			s.Rename = map[string]string{}
		}
		if _, dup := s.Rename[args[1]]; dup {
			return d.Errf("rename: %s's %q is renamed twice", args[0], args[1])
		}
		s.Rename[args[1]] = args[2]
		return nil
	}
	return d.Err(fmt.Sprintf("rename: no server block before this line names %q", args[0]))
}
