package keys

import (
	"iter"
	"regexp"
	"strings"
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
