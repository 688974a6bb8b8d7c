// Package session pins MCP sessions to the upstream replica that holds
// them, with no state shared between gateway nodes: the session id a client
// sees is a token sealed by the gateway (AES-256-GCM), holding the upstream
// that answered initialize, the upstream's own session id, when the token
// was issued, the params of the client's initialize and, when sessions are
// bound, a digest of the principal that opened it. Any node with the same
// keys opens it. With the params, a session the upstream lost (it
// restarted) is opened anew there for the client, who keeps its token
// (reopen.go); each node remembers where the sessions it reopened live now
// (remap.go).
//
// The handler (package handler) seals the upstream's Mcp-Session-Id on the
// way out and opens the client's on the way in; the selection policy
// mcp_session (policy.go) sends the request to the upstream the token names.
// Keys come from configured secrets or from Caddy's storage, rotated
// (keys.go).
package session

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A token is base64url (no padding) of
//
//	version (1 byte) | key id (4) | nonce (12) | AES-256-GCM(plaintext)
//
// with the first five bytes as additional data, and the plaintext
//
//	issued (8, unix seconds) | bound (1: 0 or 1) | principal digest (16, when bound)
//	| upstream length (2) | upstream | params length (2) | params
//	| the upstream's session id (the rest)
//
// Version 1, which earlier versions sealed, has no params (nor their
// length); it still opens.
const (
	version   = 2
	keyIDSize = 4
	headSize  = 1 + keyIDSize
	nonceSize = 12
	digestLen = 16
	// MaxToken bounds the tokens Open reads: a longer one is refused before
	// it is decoded. It leaves about 6 KiB for the upstream's own id and
	// the initialize params together.
	MaxToken = 8 << 10
)

// Session is what a token holds.
type Session struct {
	// Upstream is the upstream that answered initialize, as the pool names
	// it (its dial address).
	Upstream string
	// ID is the upstream's own session id.
	ID string
	// Issued is when the token was sealed, to the second.
	Issued time.Time
	// Params are the params of the client's initialize request (a JSON
	// object, compacted), with which the session can be opened again
	// upstream once the upstream lost it; nil when the token carries none.
	// Open's point into the token it decoded.
	Params []byte
}

// Why a token does not open. Each is a "session not found" for the client:
// it must initialize a new session.
var (
	// ErrMalformed: not a token this gateway writes (tampered, truncated,
	// too long, another format, or sealed by a key no node has).
	ErrMalformed = errors.New("not a session id this gateway issued")
	// ErrExpired: older than the configured ttl.
	ErrExpired = errors.New("the session expired")
	// ErrPrincipal: sessions are bound, and the request's principal is not
	// the one that opened the session.
	ErrPrincipal = errors.New("the session belongs to other credentials")
)

// Key is one sealing key: an AES-256-GCM cipher and the id written in the
// tokens it seals.
type Key struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

// newKey makes a key from 32 bytes of key material.
func newKey(material []byte) (*Key, error) {
	if len(material) != 32 {
		return nil, fmt.Errorf("session key: %d bytes, want 32", len(material))
	}
	block, err := aes.NewCipher(material)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k := &Key{aead: aead}
	sum := sha256.Sum256(append([]byte("caddy-mcp session key id\x00"), material...))
	copy(k.id[:], sum[:])
	return k, nil
}

// Keyring is a set of keys: Sealing seals, every key opens. It is not
// changed once made; a rotation makes a new one.
type Keyring struct {
	sealing *Key
	byID    map[[keyIDSize]byte]*Key
}

// NewKeyring holds keys, the first of which seals.
func NewKeyring(keys ...*Key) *Keyring {
	kr := &Keyring{byID: make(map[[keyIDSize]byte]*Key, len(keys))}
	for i, k := range keys {
		if i == 0 {
			kr.sealing = k
		}
		kr.byID[k.id] = k
	}
	return kr
}

// Len is how many keys open tokens.
func (kr *Keyring) Len() int { return len(kr.byID) }

// SealingID is the id of the key that seals, in hex, for the status view.
func (kr *Keyring) SealingID() string {
	if kr.sealing == nil {
		return ""
	}
	return fmt.Sprintf("%x", kr.sealing.id)
}

// Principal is the digest of a principal (the value of the configured
// bind template) kept in a bound token.
type Principal [digestLen]byte

// PrincipalOf digests a principal's value.
func PrincipalOf(value string) Principal {
	sum := sha256.Sum256([]byte("caddy-mcp session principal\x00" + value))
	var p Principal
	copy(p[:], sum[:])
	return p
}

// Seal writes s as a token with the keyring's sealing key; p, when not
// nil, binds it to a principal.
func (kr *Keyring) Seal(s Session, p *Principal) (string, error) {
	k := kr.sealing
	if k == nil {
		return "", errors.New("no session key")
	}
	if len(s.Upstream) > 0xffff || len(s.Params) > 0xffff {
		return "", errors.New("upstream address or initialize params too long")
	}
	if n := tokenLen(s, p != nil); n > MaxToken {
		return "", fmt.Errorf("a session id of %d bytes and initialize params of %d make a token of %d bytes, over the %d bytes Open reads", len(s.ID), len(s.Params), n, MaxToken)
	}
	plain := make([]byte, 0, plainLen(s, p != nil))
	plain = binary.BigEndian.AppendUint64(plain, uint64(s.Issued.Unix()))
	if p != nil {
		plain = append(plain, 1)
		plain = append(plain, p[:]...)
	} else {
		plain = append(plain, 0)
	}
	plain = binary.BigEndian.AppendUint16(plain, uint16(len(s.Upstream)))
	plain = append(plain, s.Upstream...)
	plain = binary.BigEndian.AppendUint16(plain, uint16(len(s.Params)))
	plain = append(plain, s.Params...)
	plain = append(plain, s.ID...)

	raw := make([]byte, headSize+nonceSize, headSize+nonceSize+len(plain)+k.aead.Overhead())
	raw[0] = version
	copy(raw[1:headSize], k.id[:])
	if _, err := rand.Read(raw[headSize : headSize+nonceSize]); err != nil {
		return "", err
	}
	raw = k.aead.Seal(raw, raw[headSize:headSize+nonceSize], plain, raw[:headSize])
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

// plainLen is the length of s's plaintext, bound or not.
func plainLen(s Session, bound bool) int {
	n := 8 + 1 + 2 + len(s.Upstream) + 2 + len(s.Params) + len(s.ID)
	if bound {
		n += digestLen
	}
	return n
}

// tokenLen is the length of the token Seal writes for s, bound or not.
func tokenLen(s Session, bound bool) int {
	const tagSize = 16 // AES-GCM's
	return base64.RawURLEncoding.EncodedLen(headSize + nonceSize + plainLen(s, bound) + tagSize)
}

// tokenRef names one sealed token: the id of the key that sealed it and
// its nonce, drawn at random for it alone. Both are authenticated, so a
// token that opens is the only one with its ref.
type tokenRef [keyIDSize + nonceSize]byte

// Open reads a token: it must be sealed by one of the keyring's keys and no
// older than ttl at now. With p (sessions are bound), it must have been
// bound to p when sealed: a token sealed before binding was configured
// opens for no one.
func (kr *Keyring) Open(token string, now time.Time, ttl time.Duration, p *Principal) (Session, error) {
	s, _, err := kr.open(token, now, ttl, p)
	return s, err
}

// open is Open, which also returns the token's ref.
func (kr *Keyring) open(token string, now time.Time, ttl time.Duration, p *Principal) (Session, tokenRef, error) {
	var ref tokenRef
	if len(token) > MaxToken || len(token) < base64.RawURLEncoding.EncodedLen(headSize+nonceSize+16) {
		return Session{}, ref, ErrMalformed
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || (raw[0] != 1 && raw[0] != version) {
		return Session{}, ref, ErrMalformed
	}
	var id [keyIDSize]byte
	copy(id[:], raw[1:headSize])
	k, ok := kr.byID[id]
	if !ok {
		return Session{}, ref, ErrMalformed
	}
	sealed := raw[headSize+nonceSize:]
	plain, err := k.aead.Open(sealed[:0], raw[headSize:headSize+nonceSize], sealed, raw[:headSize])
	if err != nil {
		return Session{}, ref, ErrMalformed
	}
	copy(ref[:], raw[1:headSize+nonceSize])
	s, err := decode(raw[0], plain, now, ttl, p)
	return s, ref, err
}

// decode reads an opened token's plaintext, of format version v; sealed
// by this gateway, it is well formed, but a key shared with another
// format is not ruled out.
func decode(v byte, plain []byte, now time.Time, ttl time.Duration, p *Principal) (Session, error) {
	if len(plain) < 8+1+2 {
		return Session{}, ErrMalformed
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(plain)), 0).UTC()
	rest := plain[8:]
	bound := rest[0] == 1
	rest = rest[1:]
	var held *Principal
	if bound {
		if len(rest) < digestLen+2 {
			return Session{}, ErrMalformed
		}
		held = (*Principal)(rest[:digestLen])
		rest = rest[digestLen:]
	}
	if p != nil && (held == nil || *held != *p) {
		return Session{}, ErrPrincipal
	}
	upstream, rest, ok := cut(rest)
	if !ok {
		return Session{}, ErrMalformed
	}
	var params []byte
	if v >= 2 {
		if params, rest, ok = cut(rest); !ok {
			return Session{}, ErrMalformed
		}
	}
	if now.Sub(issued) > ttl {
		return Session{}, ErrExpired
	}
	s := Session{Upstream: string(upstream), ID: string(rest), Issued: issued}
	if len(params) > 0 {
		s.Params = params[:len(params):len(params)]
	}
	return s, nil
}

// cut reads a field written with its length (2 bytes) before it.
func cut(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b)-2 < n {
		return nil, nil, false
	}
	return b[2 : 2+n], b[2+n:], true
}
