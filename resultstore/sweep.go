package resultstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"time"
)

// sweepGrace is how long after a result expired Sweep leaves it, so that
// a node whose clock is behind the sweeping one's, still writing it,
// sees it expire first.
const sweepGrace = time.Minute

// sweeper is what Sweep has yet to do, kept across calls so that each
// does a bounded part of it, and what its last call did.
type sweeper struct {
	// run makes sweeps one at a time; todo is a stack, its next task
	// last.
	run  sync.Mutex
	todo []task
	// mu guards what the last sweep did.
	mu    sync.Mutex
	last  time.Time
	swept int
	err   string
}

// task is one storage call of a sweep.
type task struct {
	do  step
	dir string
	// key is the key a stat or a removal is of.
	key string
	// age is how old a stat's key must be for its result to be removed.
	age time.Duration
	// last is the removal of a result's directory, which deletes it.
	last bool
}

type step int

const (
	// visit loads a result's manifest, to learn whether it expired.
	visit step = iota
	// stat learns the storage time of a result whose manifest does not
	// open, or of what a directory without a manifest holds.
	stat
	// list lists a result's keys, to remove them; orphan lists a
	// directory that has no manifest, to stat what it holds.
	list
	orphan
	// remove deletes one key.
	remove
)

// Sweep deletes expired results from the storage (whoever wrote them),
// making at most max storage calls. A pass lists every result, then for
// each loads its manifest and, when it expired more than a minute ago,
// lists its keys and deletes each. A call that finds no pass under way
// begins one, and returns when the pass ends or max calls are made: the
// next calls go on with it. deleted is the results whose deletion the
// call completed; err is its first storage error, which ends the call
// (the result whose step failed is left to the next pass: whatever its
// state, the pass finds it again, as it finds what a node that stopped
// mid-sweep left).
func (s *Store) Sweep(ctx context.Context, max int) (deleted int, err error) {
	sw := &s.sweeper
	sw.run.Lock()
	defer sw.run.Unlock()
	s.ledger.mu.Lock()
	s.ledger.prune(s.now())
	s.ledger.mu.Unlock()
	calls := 0
	if len(sw.todo) == 0 && max > 0 {
		calls++
		err = s.listResults(ctx)
	}
	for ; calls < max && len(sw.todo) > 0 && err == nil; calls++ {
		t := sw.todo[len(sw.todo)-1]
		sw.todo = sw.todo[:len(sw.todo)-1]
		done, terr := s.do(ctx, t)
		if terr != nil {
			sw.drop(t.dir)
			err = terr
			break
		}
		if done {
			deleted++
		}
	}
	sw.record(s.now(), deleted, err)
	return deleted, err
}

// drop forgets what is queued of the result in dir, after one of its
// steps failed: its removal stops before its manifest, so that the next
// pass finds it again.
func (sw *sweeper) drop(dir string) {
	for len(sw.todo) > 0 && sw.todo[len(sw.todo)-1].dir == dir {
		sw.todo = sw.todo[:len(sw.todo)-1]
	}
}

func (sw *sweeper) record(now time.Time, deleted int, err error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.last, sw.swept, sw.err = now, deleted, ""
	if err != nil {
		sw.err = err.Error()
	}
}

// listResults queues a visit of every result in the storage.
func (s *Store) listResults(ctx context.Context) error {
	dirs, err := s.storage.List(ctx, Prefix, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("resultstore: listing the results: %w", err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		s.sweeper.todo = append(s.sweeper.todo, task{do: visit, dir: dirs[i]})
	}
	return nil
}

// do makes task t's storage call, queueing what follows from it; done
// tells that it completed a result's deletion.
func (s *Store) do(ctx context.Context, t task) (done bool, err error) {
	switch t.do {
	case visit:
		return false, s.visit(ctx, t.dir)
	case stat:
		s.stat(ctx, t)
		return false, nil
	case list, orphan:
		return false, s.list(ctx, t)
	default:
		if err := s.storage.Delete(ctx, t.key); err != nil {
			return false, fmt.Errorf("resultstore: deleting an expired result: %w", err)
		}
		return t.last, nil
	}
}

func (s *Store) push(t task) { s.sweeper.todo = append(s.sweeper.todo, t) }

// visit loads the manifest of the result in dir: one that expired is
// listed to be removed, one that does not open is statted, a directory
// without one is listed as an orphan.
func (s *Store) visit(ctx context.Context, dir string) error {
	id := path.Base(dir)
	aead, err := s.keys.resultAEAD(id)
	if err != nil {
		return err
	}
	m, err := s.loadManifest(ctx, id, aead)
	switch {
	case errors.Is(err, ErrNotFound):
		s.push(task{do: orphan, dir: dir})
	case errors.Is(err, errUnopened):
		s.push(task{do: stat, dir: dir, key: dir + "/manifest", age: MaxTTL + sweepGrace})
	case err != nil:
		return err
	case expired(s.now().Add(-sweepGrace), m.Expires):
		s.push(task{do: list, dir: dir})
	}
	return nil
}

// stat removes the result in t.dir when t.key was stored more than t.age
// ago. A key it cannot stat (gone meanwhile, or a storage that does not
// tell) is left.
func (s *Store) stat(ctx context.Context, t task) {
	info, err := s.storage.Stat(ctx, t.key)
	if err != nil || s.now().Sub(info.Modified) <= t.age {
		return
	}
	if t.key == t.dir {
		s.push(task{do: remove, dir: t.dir, key: t.dir})
		return
	}
	s.push(task{do: list, dir: t.dir})
}

// list lists the keys of the result in t.dir and queues their removal:
// its chunks, then its manifest, then the directory itself (the last
// step, after which nothing of it is left). A directory without a
// manifest (an orphan) is statted first: what it holds must be MaxTTL old
// (no store keeps a result that long), and an empty one (a deletion cut
// short) a minute old, so that a write just begun, whose directory comes
// before its manifest, is not taken for one.
func (s *Store) list(ctx context.Context, t task) error {
	keys, err := s.storage.List(ctx, t.dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // gone meanwhile
	}
	if err != nil {
		return fmt.Errorf("resultstore: listing an expired result: %w", err)
	}
	if t.do == orphan {
		if len(keys) > 0 {
			s.push(task{do: stat, dir: t.dir, key: keys[0], age: MaxTTL + sweepGrace})
		} else {
			s.push(task{do: stat, dir: t.dir, key: t.dir, age: sweepGrace})
		}
		return nil
	}
	s.push(task{do: remove, dir: t.dir, key: t.dir, last: true})
	manifest := t.dir + "/manifest"
	s.push(task{do: remove, dir: t.dir, key: manifest})
	for _, k := range keys {
		if k != manifest {
			s.push(task{do: remove, dir: t.dir, key: k})
		}
	}
	return nil
}
