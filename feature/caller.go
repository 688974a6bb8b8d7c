package feature

import "strings"

// NormalizedAuthorization is an Authorization header value as the gateway
// compares callers by it: its scheme in lower case and its runs of white
// space made one space, so that spellings servers read alike are one
// caller.
func NormalizedAuthorization(v string) string {
	fields := strings.Fields(v)
	if len(fields) == 0 {
		return ""
	}
	fields[0] = strings.ToLower(fields[0])
	return strings.Join(fields, " ")
}
