package resultstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
)

// MinKey is the shortest key Open takes, in bytes.
const MinKey = 32

// keyInfo is the HKDF info the store's keys are derived with; its version
// changes with the format of what is stored.
const keyInfo = "caddy-mcp results v1"

// keys are the store's two keys, derived from the one given to Open.
type keys struct {
	// encrypt is what each result's own key is derived from.
	encrypt []byte
	// seal authenticates ids and binds owners.
	seal []byte
}

func deriveKeys(key []byte) (keys, error) {
	if len(key) < MinKey {
		return keys{}, fmt.Errorf("resultstore: a key of %d bytes, want at least %d", len(key), MinKey)
	}
	m, err := hkdf.Key(sha256.New, key, nil, keyInfo, 64)
	if err != nil {
		return keys{}, fmt.Errorf("resultstore: deriving keys: %w", err)
	}
	return keys{encrypt: m[:32], seal: m[32:]}, nil
}

// An id's parts: idRandom random bytes and the first idTag bytes of their
// HMAC, encoded in idLen characters of unpadded base64url.
const (
	idRandom = 16
	idTag    = 16
	idLen    = (8*(idRandom+idTag) + 5) / 6
)

// idEncoding is strict, so that one id has one spelling: with the
// trailing bits of its last character ignored, two spellings would open
// one id but name two storage keys.
var idEncoding = base64.RawURLEncoding.Strict()

// The purposes the sealing key is used for, kept apart: an HMAC made for
// one is never taken for another.
const (
	purposeID    = "id"
	purposeOwner = "owner"
	purposeBind  = "bind"
)

// mac is the HMAC-SHA256 under the sealing key of purpose and parts; the
// purpose holds no NUL and every part but the last is of a fixed length,
// so that no two inputs are one.
func (k keys) mac(purpose string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, k.seal)
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// newID is a new result's id.
func (k keys) newID() string {
	raw := make([]byte, idRandom, idRandom+idTag)
	rand.Read(raw) // never fails (crypto/rand)
	raw = append(raw, k.mac(purposeID, raw)[:idTag]...)
	return idEncoding.EncodeToString(raw)
}

// validID tells whether id is one this store's key sealed, reading no
// storage.
func (k keys) validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	raw, err := idEncoding.DecodeString(id)
	if err != nil || len(raw) != idRandom+idTag {
		return false
	}
	return hmac.Equal(raw[idRandom:], k.mac(purposeID, raw[:idRandom])[:idTag])
}

// ownerKey names an owner in this node's accounting: of a fixed size
// whatever the owner's length, and not the owner.
type ownerKey [sha256.Size]byte

func (k keys) ownerKey(owner string) ownerKey {
	return ownerKey(k.mac(purposeOwner, []byte(owner)))
}

// bind is what a result's manifest holds of its owner: an HMAC of the id
// (43 bytes: fixed) and the owner, so that nothing of it is shared by two
// results of one owner.
func (k keys) bind(id, owner string) []byte {
	return k.mac(purposeBind, []byte(id), []byte(owner))
}

// resultAEAD is the cipher of one result: AES-256-GCM under the result's
// own key, derived from the encryption key and its id, with a random
// nonce prepended to each sealed value (cipher.NewGCMWithRandomNonce).
func (k keys) resultAEAD(id string) (cipher.AEAD, error) {
	rk, err := hkdf.Expand(sha256.New, k.encrypt, keyInfo+" result "+id, 32)
	if err != nil {
		return nil, fmt.Errorf("resultstore: deriving a result's key: %w", err)
	}
	block, err := aes.NewCipher(rk)
	if err != nil {
		return nil, fmt.Errorf("resultstore: %w", err)
	}
	return cipher.NewGCMWithRandomNonce(block)
}

// manifestIndex is the index the manifest is sealed under, which no chunk
// has.
const manifestIndex = math.MaxUint64

// additional is the additional data a result's value at index is sealed
// with: the id and the index, so that a value opens only where it was
// stored. It is appended to dst.
func additional(dst []byte, id string, index uint64) []byte {
	dst = append(dst[:0], id...)
	return binary.BigEndian.AppendUint64(dst, index)
}
