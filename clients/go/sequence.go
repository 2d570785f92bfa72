package keysmith

import (
	"context"
	"fmt"
	"sync"
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
// server (Reserve), prefetching the next block in the background when a fifth
// of the last one is left. Values from one Sequence increase, across all the
// goroutines using it, and no value is ever handed out twice. Make it with
// Client.Sequence; Close it to hand the unused tail back.
type Sequence struct {
	name string
	c    *Client
	cfg  SequenceConfig

	mu       sync.Mutex
	buf      buffer
	inflight *fetch
	closed   bool
	released *Range
}

// fetch is one lease request in flight; done closes when it ended.
type fetch struct {
	done chan struct{}
	err  error
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
	s := &Sequence{name: name, c: c, cfg: cfg}
	s.buf.step = 1
	if cfg.Block > 0 {
		s.buf.block = s.clamp(cfg.Block)
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
	return s.buf.leases
}

// Available answers how many leased values are here, not yet handed out.
func (s *Sequence) Available() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.available
}

// Block answers the current lease size (0 before the first lease).
func (s *Sequence) Block() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.block
}

// Released answers what Close handed back to the server (nil: nothing, the
// values stay a gap, never handed out by anyone).
func (s *Sequence) Released() *Range {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}

// Next answers one value. It waits for a lease when none is here; it fails
// with the lease's error (ErrExhausted, ErrUnavailable, ...), with ErrClosed
// after Close, or with ctx's error, taking no value.
func (s *Sequence) Next(ctx context.Context) (int64, error) {
	for {
		s.mu.Lock()
		if v, ok := s.buf.take(); ok {
			s.maybePrefetch()
			s.mu.Unlock()
			return v, nil
		}
		f, err := s.fetchFor(1)
		s.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if err := wait(ctx, f); err != nil {
			return 0, err
		}
	}
}

// NextN answers n increasing values; on failure it takes none (they stay here).
func (s *Sequence) NextN(ctx context.Context, n int) ([]int64, error) {
	if n < 0 {
		return nil, fmt.Errorf("keysmith: n must not be negative, got %d", n)
	}
	if n == 0 {
		return []int64{}, nil
	}
	for {
		s.mu.Lock()
		if vs := s.buf.takeN(int64(n)); vs != nil {
			s.maybePrefetch()
			s.mu.Unlock()
			return vs, nil
		}
		f, err := s.fetchFor(int64(n))
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if err := wait(ctx, f); err != nil {
			return nil, err
		}
	}
}

func wait(ctx context.Context, f *fetch) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetchFor (lock held): the fetch in flight, or a new one for need values.
func (s *Sequence) fetchFor(need int64) (*fetch, error) {
	if s.closed {
		return nil, &Error{Message: fmt.Sprintf("sequence %q: this Sequence is closed", s.name), kind: ErrClosed}
	}
	if s.inflight == nil {
		s.startFetch(need)
	}
	return s.inflight, nil
}

func (s *Sequence) maybePrefetch() {
	if s.inflight == nil && !s.closed && float64(s.buf.available) <= float64(s.buf.leaseSize)*prefetchAt {
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
			s.buf.add(lease)
		}
		f.err = err
		s.inflight = nil
		s.mu.Unlock()
		close(f.done)
	}()
}

func (s *Sequence) lease(need int64) (Lease, error) {
	ctx := context.Background()
	s.mu.Lock()
	known := s.buf.block != 0
	s.mu.Unlock()
	if !known {
		info, err := s.c.GetSequence(ctx, s.name)
		if err != nil {
			return Lease{}, err
		}
		s.mu.Lock()
		if s.buf.block == 0 {
			s.buf.block = s.clamp(info.Block)
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
	b := &s.buf
	if !b.lastFetch.IsZero() {
		dt := now.Sub(b.lastFetch)
		if dt < s.cfg.TargetInterval/2 {
			b.block = s.clamp(b.block * 2)
		} else if dt > s.cfg.TargetInterval*2 {
			b.block = s.clamp(b.block / 2)
		}
	}
	b.lastFetch = now
	want := need - b.available
	if want > s.cfg.MaxBlock {
		want = s.cfg.MaxBlock
	}
	if want < b.block {
		want = b.block
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
	token, from, ok := s.buf.tail()
	step := s.buf.step
	s.mu.Unlock()
	if !ok {
		return nil
	}
	r, err := s.c.release(ctx, s.name, token, from, step, 0)
	if err != nil {
		return fmt.Errorf("keysmith: sequence %q: the unused tail from %d stays a gap (never handed out): %w", s.name, from, err)
	}
	s.mu.Lock()
	s.released = r
	s.mu.Unlock()
	return nil
}

// run is the unused part of one leased range: next, next+step, ... below end.
type run struct {
	next, end, step int64
	lease           string
	lastOfLease     bool // only a lease's last range can go back
}

func (r *run) left() int64 {
	if r.next >= r.end {
		return 0
	}
	return (r.end - r.next + r.step - 1) / r.step
}

// buffer: values leased and not handed out, in increasing order.
type buffer struct {
	runs      []run
	available int64
	// high: the largest value received; values of later leases at or below
	// it are dropped (they stay gaps) so that values handed out increase
	high      int64
	hasHigh   bool
	step      int64
	block     int64
	leaseSize int64
	lastFetch time.Time
	leases    int
}

func (b *buffer) take() (int64, bool) {
	for len(b.runs) > 0 {
		r := &b.runs[0]
		if r.next < r.end {
			v := r.next
			r.next += r.step
			b.available--
			return v, true
		}
		b.runs = b.runs[1:]
	}
	return 0, false
}

// takeN answers n values, or nil (taking nothing) when fewer are here.
func (b *buffer) takeN(n int64) []int64 {
	if b.available < n {
		return nil
	}
	out := make([]int64, 0, n)
	for int64(len(out)) < n {
		r := &b.runs[0]
		k := r.left()
		if rest := n - int64(len(out)); k > rest {
			k = rest
		}
		for i := int64(0); i < k; i++ {
			out = append(out, r.next)
			r.next += r.step
		}
		b.available -= k
		if r.next >= r.end {
			b.runs = b.runs[1:]
		}
	}
	return out
}

func (b *buffer) add(l Lease) {
	b.leases++
	b.leaseSize = l.Len()
	b.step = l.Step
	var ranges []Range
	for _, r := range l.Ranges {
		if r.End > r.Start {
			ranges = append(ranges, r)
		}
	}
	for k, r := range ranges {
		start := r.Start
		if b.hasHigh && start <= b.high {
			start += (b.high-r.Start)/l.Step*l.Step + l.Step
		}
		if start < r.End {
			ru := run{start, r.End, l.Step, l.Token, k == len(ranges)-1}
			n := ru.left()
			b.runs = append(b.runs, ru)
			b.available += n
			b.high, b.hasHigh = start+(n-1)*l.Step, true
		}
	}
}

// tail answers the newest lease whose last range has values left, and the
// next of them; empties the buffer.
func (b *buffer) tail() (string, int64, bool) {
	var token string
	var from int64
	ok := false
	for _, r := range b.runs {
		if r.lastOfLease && r.next < r.end {
			token, from, ok = r.lease, r.next, true
		}
	}
	b.runs = nil
	b.available = 0
	return token, from, ok
}
