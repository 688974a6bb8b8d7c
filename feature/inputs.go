package feature

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Inputs are the parts of a request templates read (the body aside):
// headers (canonical names), cookies and query parameters. A request may
// give each of them once at most: servers disagree on which of two values
// counts (the first, the last, or all joined), so a client could otherwise
// vary its key at will while the server reads the same credentials.
type Inputs struct {
	headers, cookies, queries []string
}

// Add adds what o reads to in.
func (in *Inputs) Add(o Inputs) {
	in.headers = sortedUnion(in.headers, o.headers)
	in.cookies = sortedUnion(in.cookies, o.cookies)
	in.queries = sortedUnion(in.queries, o.queries)
}

func sortedUnion(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Repeated reports, as a *RepeatError, the first input r gives more than
// once.
func (in *Inputs) Repeated(r *http.Request) error {
	for _, name := range in.headers {
		if n := len(r.Header[name]); n > 1 {
			return &RepeatError{What: "the " + name + " header", Count: n}
		}
	}
	if len(in.cookies) > 0 {
		cookies := r.Cookies()
		for _, name := range in.cookies {
			// Caddy's cookie placeholder takes the first cookie of the name
			// in any letter case.
			n := 0
			for _, c := range cookies {
				if strings.EqualFold(c.Name, name) {
					n++
				}
			}
			if n > 1 {
				return &RepeatError{What: "the cookie " + Clip(name), Count: n}
			}
		}
	}
	if len(in.queries) > 0 {
		query := r.URL.Query()
		for _, name := range in.queries {
			if n := len(query[name]); n > 1 {
				return &RepeatError{What: "the query parameter " + Clip(name), Count: n}
			}
		}
	}
	return nil
}

// RepeatError is a part of a request given more than once.
type RepeatError struct {
	What  string
	Count int
	// MCP: an MCP header, whose malformation MCP 2026-07-28 answers with
	// its HeaderMismatch code.
	MCP bool
}

func (e *RepeatError) Error() string {
	if e.Count == 1 {
		return e.What + " is given"
	}
	return fmt.Sprintf("%s is given %d times", e.What, e.Count)
}

// AddHeader adds a header, by its canonical name, to what in reads.
func (in *Inputs) AddHeader(name string) { in.headers = sortedUnion(in.headers, []string{name}) }

// AddCookie adds a cookie to what in reads.
func (in *Inputs) AddCookie(name string) { in.cookies = sortedUnion(in.cookies, []string{name}) }

// AddQuery adds a query parameter to what in reads.
func (in *Inputs) AddQuery(name string) { in.queries = sortedUnion(in.queries, []string{name}) }
