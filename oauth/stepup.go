package oauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Step-ups a client cannot take. A client of 2025-11-25 on re-authorizes
// once on 403 insufficient_scope, asking for the scopes the challenge
// names; one whose authorization server will not grant them (a client
// with fixed scopes, as client credentials have) comes back with a token
// that still lacks them. The TypeScript SDK's client then throws "Server
// returned 403 after trying upscoping", a transport error the model never
// reads. So a principal refused a tool's, prompt's or resource's scope
// with a challenge is remembered for StepUpWindow: refused again for the
// same name within it, it is answered with the FORBIDDEN envelope as the
// request's result, which the model reads, as a client of an earlier
// version is.

// StepUpWindow is how long a challenge for a name is remembered per
// principal: longer than a client takes to re-authorize, asking the user
// included.
const StepUpWindow = 10 * time.Minute

// MaxStepUps bounds the challenges remembered; past it, the expired are
// dropped, then one at random.
const MaxStepUps = 4096

// stepUps remembers the challenges given, by digest of the principal
// (issuer, client, subject) and of what it asked for.
type stepUps struct {
	mu sync.Mutex
	m  map[digest]time.Time
}

// stepUpKey is the digest of a principal and a name it needs a scope for.
func stepUpKey(issuer, client, subject, what, name string) digest {
	h := sha256.New()
	for _, s := range []string{issuer, client, subject, what, name} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var d digest
	h.Sum(d[:0])
	return d
}

// challenged reports whether key was challenged within StepUpWindow of
// now; when it was not, it remembers that it is now.
func (s *stepUps) challenged(key digest, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if until, ok := s.m[key]; ok && now.Before(until) {
		return true
	}
	if s.m == nil {
		s.m = make(map[digest]time.Time)
	}
	if len(s.m) >= MaxStepUps {
		s.makeRoom(now)
	}
	s.m[key] = now.Add(StepUpWindow)
	return false
}

// makeRoom drops the expired challenges among a few, and one at least.
func (s *stepUps) makeRoom(now time.Time) {
	seen := 0
	for k, until := range s.m {
		seen++
		if !now.Before(until) || len(s.m) >= MaxStepUps {
			delete(s.m, k)
		}
		if seen == 16 {
			return
		}
	}
}
