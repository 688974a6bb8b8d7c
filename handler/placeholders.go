package handler

import (
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"

	"github.com/caddymcp/caddy-mcp/internal/spelling"
)

// Placeholders in key templates: the Caddyfile's shorthands expanded, so
// that a template means the same in a JSON config as in a Caddyfile, and
// every placeholder checked when the config loads, so that a typo does not
// silently become one bucket shared by every client.

// expandShorthands expands the Caddyfile's placeholder shorthands, such as
// {client_ip} for {http.vars.client_ip} or {header.X} for
// {http.request.header.X}, as Caddy's Caddyfile adapter does (the table
// is Caddy v2.11's; a test holds it to the adapter's).
func expandShorthands(template string) string {
	var b strings.Builder
	for piece, p := range piecesOf(template) {
		if p == "" {
			b.WriteString(piece)
			continue
		}
		b.WriteString("{" + expandShorthand(p) + "}")
	}
	return b.String()
}

func expandShorthand(p string) string {
	if long, ok := shorthands[p]; ok {
		return long
	}
	for _, s := range shorthandPrefixes {
		if rest, ok := strings.CutPrefix(p, s.short); ok && s.name.MatchString(rest) {
			return s.long + rest
		}
	}
	return p
}

// shorthands are the Caddyfile's fixed shorthands, by name.
var shorthands = map[string]string{
	"host": "http.request.host", "hostport": "http.request.hostport", "port": "http.request.port",
	"orig_method": "http.request.orig_method", "orig_uri": "http.request.orig_uri",
	"orig_path": "http.request.orig_uri.path", "orig_dir": "http.request.orig_uri.path.dir",
	"orig_file": "http.request.orig_uri.path.file", "orig_query": "http.request.orig_uri.query",
	"orig_?query": "http.request.orig_uri.prefixed_query", "method": "http.request.method",
	"uri": "http.request.uri", "%uri": "http.request.uri_escaped", "path": "http.request.uri.path",
	"%path": "http.request.uri.path_escaped", "dir": "http.request.uri.path.dir",
	"file": "http.request.uri.path.file", "query": "http.request.uri.query",
	"%query": "http.request.uri.query_escaped", "?query": "http.request.uri.prefixed_query",
	"remote": "http.request.remote", "remote_host": "http.request.remote.host",
	"remote_port": "http.request.remote.port", "scheme": "http.request.scheme",
	"uuid": "http.request.uuid", "tls_cipher": "http.request.tls.cipher_suite",
	"tls_version": "http.request.tls.version", "tls_client_fingerprint": "http.request.tls.client.fingerprint",
	"tls_client_issuer": "http.request.tls.client.issuer", "tls_client_serial": "http.request.tls.client.serial",
	"tls_client_subject":                "http.request.tls.client.subject",
	"tls_client_certificate_pem":        "http.request.tls.client.certificate_pem",
	"tls_client_certificate_der_base64": "http.request.tls.client.certificate_der_base64",
	"upstream_hostport":                 "http.reverse_proxy.upstream.hostport",
	"client_ip":                         "http.vars.client_ip",
}

// shorthandPrefixes are the Caddyfile's shorthands that end in a name.
var shorthandPrefixes = func() []struct {
	short, long string
	name        *regexp.Regexp
} {
	word, dotted := regexp.MustCompile(`^[\w-]*$`), regexp.MustCompile(`^[\w-.]*$`)
	return []struct {
		short, long string
		name        *regexp.Regexp
	}{
		{"header.", "http.request.header.", word}, {"cookie.", "http.request.cookie.", word},
		{"labels.", "http.request.host.labels.", word}, {"path.", "http.request.uri.path.", word},
		{"file.", "http.request.uri.path.file.", word}, {"query.", "http.request.uri.query.", word},
		{"re.", "http.regexp.", dotted}, {"vars.", "http.vars.", word},
		{"rp.", "http.reverse_proxy.", dotted}, {"resp.", "http.intercept.", dotted},
		{"err.", "http.error.", dotted}, {"file_match.", "http.matchers.file.", word},
	}
}()

// piecesOf splits a template into its pieces as Caddy's replacer reads it:
// literal text, with p "", and placeholders, "{p}" with p the name (a
// backslash escapes a brace).
func piecesOf(text string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		literal := 0
		for i := 0; i < len(text); i++ {
			switch text[i] {
			case '\\':
				i++
			case '{':
				end := strings.IndexByte(text[i+1:], '}')
				if end < 0 {
					i = len(text)
					continue
				}
				if literal < i && !yield(text[literal:i], "") {
					return
				}
				if !yield(text[i:i+end+2], text[i+1:i+1+end]) {
					return
				}
				i += end + 1
				literal = i + 1
			}
		}
		if literal < len(text) {
			yield(text[literal:], "")
		}
	}
}

// placeholdersOf lists the placeholders of a template, without braces.
func placeholdersOf(text string) []string {
	var names []string
	for _, p := range piecesOf(text) {
		if p != "" {
			names = append(names, p)
		}
	}
	return names
}

// checkKeyTemplate refuses placeholders that would expand to nothing on every
// request: an unknown shorthand ({clientip}), an unknown namespace, or an
// unknown name under http.request or http.mcp; and the request body, which
// would cost a copy of the body per message. Placeholders of other
// http.* namespaces (http.vars, http.auth, http.regexp, ...) are set by
// other handlers, and are taken as written.
func checkKeyTemplate(text string) error {
	for _, p := range placeholdersOf(text) {
		namespace, rest, dotted := strings.Cut(p, ".")
		switch {
		case !dotted:
			return unknownPlaceholder(p, shorthandNames)
		case namespace == "env" || namespace == "system" || namespace == "time" || namespace == "file":
		case namespace != "http":
			return fmt.Errorf("unknown placeholder {%s}: placeholders are {http.*}, {env.*}, {system.*}, {time.*} or a shorthand such as {client_ip}", p)
		case strings.HasPrefix(rest, "mcp."):
			if !slices.Contains(mcpPlaceholders, p) {
				return unknownPlaceholder(p, mcpPlaceholders)
			}
		case p == "http.request.body" || p == "http.request.body_base64":
			return fmt.Errorf("{%s} copies the whole request body for every message a limit counts, and differs with every id: key on who calls or on what, such as {client_ip}, a header or {http.mcp.tool}", p)
		case strings.HasPrefix(rest, "request."):
			if !knownRequestPlaceholder(p) {
				return unknownPlaceholder(p, requestCandidates(p))
			}
		}
	}
	return nil
}

// CheckKeyTemplate checks a key or bind template as Validate does, so that
// the Caddyfile adapter can report a mistake at the line it is on.
func CheckKeyTemplate(template string) error {
	return checkKeyTemplate(expandShorthands(template))
}

func unknownPlaceholder(p string, known []string) error {
	if near := spelling.Nearest(p, known); near != "" {
		return fmt.Errorf("unknown placeholder {%s}: did you mean {%s}?", p, near)
	}
	return fmt.Errorf("unknown placeholder {%s}", p)
}

// mcpPlaceholders are the placeholders the handler provides.
var mcpPlaceholders = []string{
	"http.mcp.method", "http.mcp.tool", "http.mcp.id", "http.mcp.session_id",
	"http.mcp.protocol_version", "http.mcp.batch_size", "http.mcp.error_code",
	placeholderPrefix + authorization,
}

// shorthandNames are the Caddyfile shorthands most used in keys, for
// suggestions.
var shorthandNames = []string{
	"client_ip", "remote_host", "remote", "host", "method", "path", "uri",
	"header.Authorization", "vars.client_ip",
}

// requestPlaceholders are the fixed {http.request.*} placeholders of Caddy
// v2.11, and requestPrefixes those that end in a name or an index.
var (
	requestPlaceholders = []string{
		"http.request.method", "http.request.scheme", "http.request.proto", "http.request.proto_name",
		"http.request.host", "http.request.port", "http.request.hostport", "http.request.local",
		"http.request.local.host", "http.request.local.port", "http.request.remote",
		"http.request.remote.host", "http.request.remote.port", "http.request.uri",
		"http.request.uri_escaped", "http.request.uri.path", "http.request.uri.path_escaped",
		"http.request.uri.path.file", "http.request.uri.path.dir", "http.request.uri.path.file.base",
		"http.request.uri.path.file.ext", "http.request.uri.query", "http.request.uri.query_escaped",
		"http.request.uri.prefixed_query", "http.request.duration", "http.request.duration_ms",
		"http.request.uuid", "http.request.body", "http.request.body_base64", "http.request.orig_method",
		"http.request.orig_uri", "http.request.orig_uri.path", "http.request.orig_uri.path.file",
		"http.request.orig_uri.path.file_escaped", "http.request.orig_uri.path.dir",
		"http.request.orig_uri.query", "http.request.orig_uri.prefixed_query",
	}
	requestPrefixes = []string{
		"http.request.header.", "http.request.cookie.", "http.request.host.labels.",
		"http.request.tls.", "http.request.uri.path.", "http.request.uri.query.",
		"http.request.orig_uri.path.", "http.request.remote.host/",
	}
)

// requestCandidates are what an unknown {http.request.*} placeholder may
// have meant: the fixed ones, and each prefix with the name p ends in
// ({http.request.headers.X-Key} for {http.request.header.X-Key}).
func requestCandidates(p string) []string {
	candidates := slices.Clone(requestPlaceholders)
	if parts := strings.SplitN(p, ".", 4); len(parts) == 4 {
		for _, prefix := range requestPrefixes {
			if strings.Count(prefix, ".") == 3 {
				candidates = append(candidates, prefix+parts[3])
			}
		}
	}
	return candidates
}

func knownRequestPlaceholder(p string) bool {
	if slices.Contains(requestPlaceholders, p) {
		return true
	}
	for _, prefix := range requestPrefixes {
		if len(p) > len(prefix) && strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}
