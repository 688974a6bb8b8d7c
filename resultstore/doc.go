// Package resultstore keeps whole tool results in Caddy's storage
// (certmagic.Storage: the file system by default, or Redis, Consul, S3…),
// encrypted and written as they arrive, so that a result too large to
// answer at once can be read back page by page from any node of a fleet
// that shares the storage.
//
// # Writing and reading
//
// Create opens a Writer for an owner (the principal the result is bound
// to). The Writer holds one chunk (Limits.Chunk) of the result at a time:
// each chunk is encrypted and stored as it fills, so that memory follows
// the buffer, never the result. Close stores the last chunk and then the
// manifest (the result's size, chunk size, expiry and owner binding); only
// then can the result be read. Read gives a range of it, at most MaxRead
// bytes, to its owner only, loading and opening the one to three chunks the
// range spans. The chunks opened last (4 MiB of them) are kept in memory,
// so that the pages read one after another from a chunk open it once;
// what may be read is decided by the manifest, which every Read loads.
//
// # What the storage sees
//
// A result is kept under "caddy-mcp/results/<id>/": its manifest
// ("manifest") and its chunks ("0", "1", …). Whoever reads the storage
// reads neither a result nor its owner. From the key given to Open,
// HKDF-SHA256 (info "caddy-mcp results v1") derives two keys: one to
// encrypt, one to seal ids and bind owners. Each result is encrypted under
// a key of its own, derived from the first and the result's id, with
// AES-256-GCM, a random nonce per chunk (so the nonces of one key stay far
// below GCM's bound of 2^32 random nonces), and additional data the id and
// the chunk's index, so that no chunk can be swapped with another, moved
// to another result or taken for the manifest. The manifest holds an HMAC
// of the owner (bound to the id), never the owner; it is compared in
// constant time.
//
// An id is 16 random bytes and 16 bytes of their HMAC under the sealing
// key, in unpadded base64url (43 characters): it cannot be guessed, and a
// made-up or altered one is refused before any storage is read. Read
// answers ErrNotFound for every id its caller may not read (made up,
// malformed, another owner's, expired, deleted, still being written, sealed
// under another key), so that no answer tells whether a result exists.
//
// # Quotas and expiry
//
// The quotas (Limits) are this node's accounting, in memory, restored from
// nothing at start: a Ledger, which the stores opened anew on the same
// storage and key (a reloaded config's) share through OpenShared. In a
// fleet, each node bounds what it wrote, and the storage holds at most the
// sum of the nodes' bounds. A result expires
// Limits.TTL after its Create; it counts against its owner until then,
// whether or not its chunks are deleted yet. A Writer not closed by then
// fails with ErrExpired.
//
// Sweep deletes expired results from the storage, whoever wrote them,
// within a bound of storage calls per call. It also deletes what an
// interrupted write or delete left: every Writer stores a manifest before
// its first chunk (marked unfinished, with the result's expiry), and
// deletions remove the manifest last, so that everything stored under a
// result is found from a manifest whose expiry is known. What no key of
// this store opens (results sealed before the key changed) is deleted
// once its storage time is MaxTTL old.
//
// # Storage
//
// The Writer reuses its buffer: the value given to Store must be written
// or copied before Store returns, as every certmagic storage does. Nodes
// that share a storage share a key (the results are then one set) and
// should agree on the time within a minute: a node deletes a result only
// that long after it expired (sweepGrace).
package resultstore
