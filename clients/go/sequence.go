package keysmith

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// prefetchAt: a Sequence prefetches when this fraction of its last lease is left.
const prefetchAt = 0.2

// SequenceConfig sizes a Sequence's leases. The zero value: the first lease
// has the sequence's own block size; later ones adapt to the rate within
// 1..100000 so that a lease lasts about one second.
type SequenceConfig struct {
	// Block is the first lease's size (0: the sequence's own block size).
	Block int64
	// MinBlock and MaxBlock bound the lease size (defaults 1 and 100000;
	// MaxBlock above the server's --max-count, 100000 unless changed, makes
	// leases fail with ErrTooLarge).
	MinBlock, MaxBlock int64
	// TargetInterval is how long a lease should last (default 1 s): the block
	// doubles when leases are used up faster than half of it and halves when
	// slower than twice it.
	TargetInterval time.Duration
}

// Sequence hands out the values of one sequence from blocks leased from the
// server (Reserve). The current block is read with one atomic add per value
// (no lock, no other check): only the caller that finds the block used up
// takes the slow path, under a lock, that installs the next block, which is
// normally here already (the last safe-distance values of a lease are a
// block of their own, whose installation starts the next lease). Blocks are prefetched in the background in a chain: the next
// lease is asked for when the values left (in the current block and the
// ones waiting behind it) fall to the "safe distance", a fifth of a lease,
// which grows with the rate (the lease size doubles when leases are used up
// within half of TargetInterval, and the distance grows by a fifth of a
// lease, up to four, each time a caller had to wait for one). Values from
// one Sequence increase, across all the goroutines using it, and no value is
// ever handed out twice. Make it with Client.Sequence; Close it to hand the
// unused tail back.
type Sequence struct {
	name string
	c    *Client
	cfg  SequenceConfig

	// cur: the block values are taken from, lock-free; replaced under mu
	cur atomic.Pointer[block]

	mu       sync.Mutex
	queue    []*block // prefetched blocks, in increasing order, after cur
	inflight *fetch
	closed   bool
	released *Range
	// high: the largest value received; values of later leases at or below
	// it are dropped (they stay gaps) so that values handed out increase
	high      int64
	hasHigh   bool
	blockSize int64
	leaseSize int64
	lastFetch time.Time
	leases    int
	ahead     int64 // the safe distance, in fifths of a lease (1..4)
}

// block is one leased range: the values start, start+step, ... (n of them);
// taken counts the values claimed (it may run past n: those claims failed).
type block struct {
	taken atomic.Int64
	start int64
	step  int64
	n     int64
	lease string
	last  bool // the lease's last range: only it can go back
}

func (b *block) left() int64 {
	if t := b.taken.Load(); t < b.n {
		return b.n - t
	}
	return 0
}

// freeze claims every value left; answers the index of the first of them.
// Takers on the fast path get nothing more from b.
func (b *block) freeze() int64 {
	if t := b.taken.Swap(b.n); t < b.n {
		return t
	}
	return b.n
}

// rest is a new block of b's values from index i on (b frozen at or before i).
func (b *block) rest(i int64) *block {
	return &block{start: b.start + i*b.step, step: b.step, n: b.n - i, lease: b.lease, last: b.last}
}

// rangeOf: the k values of b from index i.
func rangeOf(b *block, i, k int64) Range {
	first := b.start + i*b.step
	return Range{Start: first, End: first + (k-1)*b.step + 1, Step: b.step}
}

// fetch is one lease request in flight; done closes when it ended.
type fetch struct {
	done    chan struct{}
	err     error
	starved bool // a caller waited for it: the safe distance grew once
}

// Sequence answers a handle serving name's values from leased blocks. It
// fails, making nothing, for bounds that do not hold 1 <= MinBlock <=
// MaxBlock, a negative Block or a negative TargetInterval. No request is
// sent before the first value is asked for.
func (c *Client) Sequence(name string, cfg SequenceConfig) (*Sequence, error) {
	if cfg.MinBlock == 0 {
		cfg.MinBlock = 1
	}
	if cfg.MaxBlock == 0 {
		cfg.MaxBlock = 100_000
	}
	if cfg.TargetInterval == 0 {
		cfg.TargetInterval = time.Second
	}
	if cfg.MinBlock < 1 || cfg.MinBlock > cfg.MaxBlock {
		return nil, fmt.Errorf("keysmith: SequenceConfig needs 1 <= MinBlock <= MaxBlock, got MinBlock=%d MaxBlock=%d", cfg.MinBlock, cfg.MaxBlock)
	}
	if cfg.Block < 0 || cfg.TargetInterval < 0 {
		return nil, fmt.Errorf("keysmith: SequenceConfig.Block and .TargetInterval must not be negative, got %d and %v", cfg.Block, cfg.TargetInterval)
	}
	s := &Sequence{name: name, c: c, cfg: cfg, ahead: 1}
	s.cur.Store(&block{step: 1})
	if cfg.Block > 0 {
		s.blockSize = s.clamp(cfg.Block)
	}
	c.mu.Lock()
	c.sequences[s] = struct{}{}
	c.mu.Unlock()
	return s, nil
}

// Name answers the sequence's name.
func (s *Sequence) Name() string { return s.name }

// Leases answers how many leases the Sequence has received.
func (s *Sequence) Leases() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases
}

// Available answers how many leased values are here, not yet handed out.
func (s *Sequence) Available() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.available()
}

// available (lock held): the values left in cur and the queue.
func (s *Sequence) available() int64 {
	n := s.cur.Load().left()
	for _, b := range s.queue {
		n += b.n
	}
	return n
}

// Block answers the current lease size (0 before the first lease).
func (s *Sequence) Block() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blockSize
}

// Released answers what Close handed back to the server (nil: nothing, the
// values stay a gap, never handed out by anyone).
func (s *Sequence) Released() *Range {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}

// Next answers one value: one atomic add on the current block, without a
// lock, unless the block is used up. It waits for a lease when none is
// here; it fails with the lease's error (ErrExhausted, ErrUnavailable, ...),
// with ErrClosed after Close, or with ctx's error, taking no value.
func (s *Sequence) Next(ctx context.Context) (int64, error) {
	b := s.cur.Load()
	if i := b.taken.Add(1) - 1; i < b.n {
		return b.start + i*b.step, nil
	}
	r, err := s.slowRange(ctx, 1)
	return r.Start, err
}

// NextRange answers n consecutive values of one block as a Range (Start,
// Start+Step, ..., n of them), in O(1): one compare-and-swap on the current
// block when it holds n more values. When it holds fewer, they stay a gap
// (never handed out) once the next block is here, so that values still
// increase. It fails for n < 1 or n above SequenceConfig.MaxBlock (no lease
// holds that many), and like Next, taking no value.
func (s *Sequence) NextRange(ctx context.Context, n int64) (Range, error) {
	if n < 1 || n > s.cfg.MaxBlock {
		return Range{}, fmt.Errorf("keysmith: NextRange needs 1 <= n <= SequenceConfig.MaxBlock (%d), got n=%d", s.cfg.MaxBlock, n)
	}
	b := s.cur.Load()
	for {
		t := b.taken.Load()
		if t+n > b.n {
			break
		}
		if b.taken.CompareAndSwap(t, t+n) {
			return rangeOf(b, t, n), nil
		}
	}
	return s.slowRange(ctx, n)
}

// slowRange: n consecutive values, under the lock, installing the next
// block or waiting for a lease as needed.
func (s *Sequence) slowRange(ctx context.Context, n int64) (Range, error) {
	for fetches := 0; ; {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return Range{}, s.closedError()
		}
		b := s.merged()
		if b.n >= n {
			s.install(b.rest(n))
			s.mu.Unlock()
			return rangeOf(b, 0, n), nil
		}
		if len(s.queue) > 0 {
			// fewer than n left here (none, for Next): they stay a gap
			next := s.queue[0]
			s.queue = s.queue[1:]
			s.install(next)
			s.mu.Unlock()
			continue
		}
		s.install(b)
		if n > 1 && fetches == 8 {
			s.mu.Unlock()
			return Range{}, fmt.Errorf("keysmith: sequence %q: %d leases in a row held no %d consecutive values; ask for fewer", s.name, fetches, n)
		}
		fetches++
		// a lease of at least n values: the need counts what is here already
		f, err := s.fetchFor(n + s.available())
		s.mu.Unlock()
		if err != nil {
			return Range{}, err
		}
		if err := wait(ctx, f); err != nil {
			return Range{}, err
		}
	}
}

// merged (lock held) takes the current block's values out of reach of the
// fast path, with the queued blocks that continue them (the same lease,
// the next values): one block, not installed.
func (s *Sequence) merged() *block {
	b := s.cur.Load()
	r := b.rest(b.freeze())
	for len(s.queue) > 0 {
		q := s.queue[0]
		if r.n > 0 && (q.lease != r.lease || q.step != r.step || r.start+r.n*r.step != q.start) {
			break
		}
		if r.n == 0 {
			r = q
		} else {
			r = &block{start: r.start, step: r.step, n: r.n + q.n, lease: r.lease, last: q.last}
		}
		s.queue = s.queue[1:]
	}
	return r
}

// NextN answers n increasing values (from one block or several); on failure
// it takes none (they stay here). NextRange answers a batch in O(1).
func (s *Sequence) NextN(ctx context.Context, n int) ([]int64, error) {
	if n < 0 {
		return nil, fmt.Errorf("keysmith: n must not be negative, got %d", n)
	}
	if n == 0 {
		return []int64{}, nil
	}
	need := int64(n)
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, s.closedError()
		}
		b := s.cur.Load()
		rest := b.rest(b.freeze())
		have := rest.n
		for _, q := range s.queue {
			have += q.n
		}
		if have >= need {
			out := make([]int64, 0, need)
			for {
				k := rest.n
				if k > need-int64(len(out)) {
					k = need - int64(len(out))
				}
				for j := int64(0); j < k; j++ {
					out = append(out, rest.start+j*rest.step)
				}
				if int64(len(out)) == need {
					s.install(rest.rest(k))
					break
				}
				rest = s.queue[0]
				s.queue = s.queue[1:]
			}
			s.mu.Unlock()
			return out, nil
		}
		s.install(rest)
		f, err := s.fetchFor(need)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if err := wait(ctx, f); err != nil {
			return nil, err
		}
	}
}

// install (lock held) makes b the current block. When b is the last block
// here, its last safe-distance values are split off into a block of their
// own behind it: the caller that installs that one (the slow path) starts
// the next lease, so the fast path never checks for a prefetch.
func (s *Sequence) install(b *block) {
	if len(s.queue) == 0 && s.leases > 0 && !s.closed {
		if d := s.distance(); d > 0 && b.n > d {
			s.queue = append(s.queue, b.rest(b.n-d))
			b = &block{start: b.start, step: b.step, n: b.n - d, lease: b.lease}
		}
	}
	s.cur.Store(b)
	s.maybePrefetch()
}

// distance (lock held): the safe distance, in values.
func (s *Sequence) distance() int64 {
	return int64(float64(s.leaseSize)*prefetchAt) * s.ahead
}

func (s *Sequence) closedError() error {
	return &Error{Message: fmt.Sprintf("sequence %q: this Sequence is closed", s.name), kind: ErrClosed}
}

func wait(ctx context.Context, f *fetch) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetchFor (lock held): the fetch in flight, or a new one for need values;
// a caller waits for it, so the safe distance grows (once per fetch).
func (s *Sequence) fetchFor(need int64) (*fetch, error) {
	if s.closed {
		return nil, s.closedError()
	}
	if s.inflight == nil {
		s.startFetch(need)
	}
	if f := s.inflight; !f.starved && s.leases > 0 {
		f.starved = true
		if s.ahead < 4 {
			s.ahead++
		}
	}
	return s.inflight, nil
}

func (s *Sequence) maybePrefetch() {
	if s.inflight == nil && !s.closed && s.leases > 0 && s.available() <= s.distance() {
		s.startFetch(0)
	}
}

// startFetch (lock held) leases the next block in a goroutine. It uses no
// caller's context: the lease serves every goroutine of the Sequence; the
// client's deadline bounds it.
func (s *Sequence) startFetch(need int64) {
	f := &fetch{done: make(chan struct{})}
	s.inflight = f
	go func() {
		lease, err := s.lease(need)
		s.mu.Lock()
		if err == nil {
			s.add(lease)
		}
		f.err = err
		s.inflight = nil
		if err == nil {
			// the chain: another lease when the safe distance is not covered yet
			s.maybePrefetch()
		}
		s.mu.Unlock()
		close(f.done)
	}()
}

func (s *Sequence) lease(need int64) (Lease, error) {
	ctx := context.Background()
	s.mu.Lock()
	known := s.blockSize != 0
	s.mu.Unlock()
	if !known {
		info, err := s.c.GetSequence(ctx, s.name)
		if err != nil {
			return Lease{}, err
		}
		s.mu.Lock()
		if s.blockSize == 0 {
			s.blockSize = s.clamp(info.Block)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	count := s.count(need, time.Now())
	s.mu.Unlock()
	return s.c.Reserve(ctx, s.name, int(count))
}

func (s *Sequence) clamp(b int64) int64 {
	if b < s.cfg.MinBlock {
		return s.cfg.MinBlock
	}
	if b > s.cfg.MaxBlock {
		return s.cfg.MaxBlock
	}
	return b
}

// count (lock held): how many values to reserve now; adapts the block to the rate.
func (s *Sequence) count(need int64, now time.Time) int64 {
	if !s.lastFetch.IsZero() {
		dt := now.Sub(s.lastFetch)
		if dt < s.cfg.TargetInterval/2 {
			s.blockSize = s.clamp(s.blockSize * 2)
		} else if dt > s.cfg.TargetInterval*2 {
			s.blockSize = s.clamp(s.blockSize / 2)
		}
	}
	s.lastFetch = now
	want := need - s.available()
	if want > s.cfg.MaxBlock {
		want = s.cfg.MaxBlock
	}
	if want < s.blockSize {
		want = s.blockSize
	}
	return want
}

// Close stops serving and hands the unused tail of the newest lease back to
// the server (it goes back only when no one reserved since; otherwise, or
// when no server takes it, it stays a gap: never handed out by anyone).
// Released tells what went back. It waits for a lease in flight, so that it
// goes back too. Idempotent; the error is the release's, the Sequence is
// closed either way.
func (s *Sequence) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	f := s.inflight
	s.mu.Unlock()
	if f != nil {
		<-f.done
	}
	s.c.mu.Lock()
	delete(s.c.sequences, s)
	s.c.mu.Unlock()
	s.mu.Lock()
	b := s.cur.Load()
	var tail *block
	var from int64
	blocks := append([]*block{b.rest(b.freeze())}, s.queue...)
	for k, r := range blocks {
		if r.last && r.n > 0 {
			// from the first value of the unused run of this lease that ends here
			tail, from = r, r.start
			for j := k - 1; j >= 0; j-- {
				p := blocks[j]
				if p.n == 0 || p.lease != r.lease || p.start+p.n*p.step != from {
					break
				}
				from = p.start
			}
		}
	}
	s.queue = nil
	s.cur.Store(&block{step: 1})
	s.mu.Unlock()
	if tail == nil {
		return nil
	}
	r, err := s.c.release(ctx, s.name, tail.lease, from, tail.step, 0)
	if err != nil {
		return fmt.Errorf("keysmith: sequence %q: the unused tail from %d stays a gap (never handed out): %w", s.name, from, err)
	}
	s.mu.Lock()
	s.released = r
	s.mu.Unlock()
	return nil
}

// add (lock held) queues a lease's ranges as blocks, dropping values at or
// below the highest received (they stay gaps) so that values increase.
func (s *Sequence) add(l Lease) {
	s.leases++
	s.leaseSize = l.Len()
	var ranges []Range
	for _, r := range l.Ranges {
		if r.End > r.Start {
			ranges = append(ranges, r)
		}
	}
	for k, r := range ranges {
		start := r.Start
		if s.hasHigh && start <= s.high {
			start += (s.high-r.Start)/l.Step*l.Step + l.Step
		}
		if start < r.End {
			n := (r.End - start + l.Step - 1) / l.Step
			s.queue = append(s.queue, &block{start: start, step: l.Step, n: n, lease: l.Token, last: k == len(ranges)-1})
			s.high, s.hasHigh = start+(n-1)*l.Step, true
		}
	}
}
