package feature

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// PlaceholderPrefix starts every placeholder the gateway provides:
// {http.mcp.tool}, {http.mcp.auth.subject}…
const PlaceholderPrefix = "http.mcp."

// digestPrefix starts a key kept as a digest, and a key shown as one.
const digestPrefix = "sha256:"

// BoundKey returns the key kept for the value v: v itself, or, when v is
// longer than max bytes (or could be mistaken for a digest), "sha256:"
// and the hex SHA-256 of v: 71 bytes, with collisions out of reach.
func BoundKey(v string, max int) string {
	if len(v) <= max && !strings.HasPrefix(v, digestPrefix) {
		return v
	}
	return digest(v)
}

func digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return digestPrefix + hex.EncodeToString(sum[:])
}

// ShownKey is a rule's key as the log and the status API show it without
// log_key: "sha256:" and the first 16 hex digits of the SHA-256 of the
// value, which an operator can compute for a value they know
// (printf %s "$KEY" | sha256sum | cut -c1-16).
func ShownKey(k string) string {
	if !isDigest(k) {
		k = digest(k) // a kept digest is already the digest of the value
	}
	return k[:len(digestPrefix)+16]
}

// isDigest tells whether k is a digest as BoundKey keeps one: "sha256:"
// and 64 hex digits. A value that only begins like one (a raw value given
// where a kept key was meant) is digested, never sliced.
func isDigest(k string) bool {
	hexDigits, ok := strings.CutPrefix(k, digestPrefix)
	if !ok || len(hexDigits) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(hexDigits)
	return err == nil
}
