package keysmith

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"
)

const (
	// DefaultWorkerTTL is a worker lease's time to live when none is given.
	DefaultWorkerTTL = 10 * time.Second
	// DefaultWorkerMax is a group's size when none is given: worker ids 0..1023.
	DefaultWorkerMax = 1024
)

// WorkerLeaseInfo is a worker id held: what a lease or a renewal answers.
type WorkerLeaseInfo struct {
	Group  string
	Worker int64
	Fence  int64
	Max    int64
	// NotBeforeMs and UntilMs (ms since 1970): ids made with the worker id use
	// times in NotBeforeMs..UntilMs; renewals move UntilMs forward.
	NotBeforeMs int64
	UntilMs     int64
	// ExpiresMs: the lease expires then unless renewed (the server's clock).
	ExpiresMs int64
	TTLMs     int64
	// Token renews and releases the lease. Keep it out of logs.
	Token string
}

type wireWorkerLease struct {
	Group       string `json:"group"`
	Worker      jint   `json:"worker"`
	Fence       jint   `json:"fence"`
	Max         jint   `json:"max"`
	NotBeforeMs jint   `json:"not_before_ms"`
	UntilMs     jint   `json:"until_ms"`
	ExpiresMs   jint   `json:"expires_ms"`
	TTLMs       jint   `json:"ttl_ms"`
	Lease       string `json:"lease"`
}

func (w wireWorkerLease) info() WorkerLeaseInfo {
	return WorkerLeaseInfo{w.Group, int64(w.Worker), int64(w.Fence), int64(w.Max), int64(w.NotBeforeMs),
		int64(w.UntilMs), int64(w.ExpiresMs), int64(w.TTLMs), w.Lease}
}

// WorkerInfo is one worker id of a group as ListWorkers lists it (never a token).
type WorkerInfo struct {
	Worker int64
	// Held: a live lease holds it (by the store's clock).
	Held bool
	// Holder, ExpiresMs and ExpiresInMs are set only while held.
	Holder      *string
	Fence       int64
	UntilMs     int64
	ExpiresMs   *int64
	ExpiresInMs *int64
}

func ttlQuery(ttl time.Duration, max int64) url.Values {
	q := url.Values{}
	if ttl != 0 {
		q.Set("ttl_ms", strconv.FormatInt(ttl.Milliseconds(), 10))
	}
	if max != 0 {
		q.Set("max", strconv.FormatInt(max, 10))
	}
	return q
}

// LeaseWorker leases the lowest free worker id of group in 0..max-1 (0: the
// server's default, 1024) for ttl (0: the server's default, 10 s).
// ErrConflict (code "lease_refused") when every one is held; ErrBadRequest for a bad
// group, ttl or max. Never sent twice: a lease whose answer was lost would
// hold a worker id until it expires.
func (c *Client) LeaseWorker(ctx context.Context, group string, ttl time.Duration, max int64) (WorkerLeaseInfo, error) {
	var out wireWorkerLease
	err := c.call(ctx, request{method: "POST", path: "/v1/workers/" + seg(group) + "/lease", query: ttlQuery(ttl, max)}, 0, &out)
	return out.info(), err
}

// RenewWorker renews a worker lease; use the answer's Token from then on.
// ErrConflict when it expired or another holder took the worker id.
func (c *Client) RenewWorker(ctx context.Context, group, token string, ttl time.Duration) (WorkerLeaseInfo, error) {
	return c.renewWorker(ctx, group, token, ttl, 0)
}

func (c *Client) renewWorker(ctx context.Context, group, token string, ttl, deadline time.Duration) (WorkerLeaseInfo, error) {
	var out wireWorkerLease
	err := c.call(ctx, request{method: "POST", path: "/v1/workers/" + seg(group) + "/lease/renew", query: ttlQuery(ttl, 0), body: tokenBody{token}, safe: true}, deadline, &out)
	return out.info(), err
}

// ReleaseWorker releases a worker lease (its time floor stays); false when it
// was lost already.
func (c *Client) ReleaseWorker(ctx context.Context, group, token string) (bool, error) {
	var out struct {
		Released bool `json:"released"`
	}
	err := c.call(ctx, request{method: "POST", path: "/v1/workers/" + seg(group) + "/lease/release", body: tokenBody{token}, safe: true}, 0, &out)
	return out.Released, err
}

// ListWorkers lists the worker ids of group ever leased, by worker id: held
// or free, by whom, until when (never a token). An unknown group is empty.
func (c *Client) ListWorkers(ctx context.Context, group string) ([]WorkerInfo, error) {
	var out struct {
		Workers []struct {
			Worker      jint    `json:"worker"`
			Held        bool    `json:"held"`
			Holder      *string `json:"holder"`
			Fence       jint    `json:"fence"`
			UntilMs     jint    `json:"until_ms"`
			ExpiresMs   optInt  `json:"expires_ms"`
			ExpiresInMs optInt  `json:"expires_in_ms"`
		} `json:"workers"`
	}
	if err := c.call(ctx, request{method: "GET", path: "/v1/workers/" + seg(group), safe: true}, 0, &out); err != nil {
		return nil, err
	}
	ws := make([]WorkerInfo, len(out.Workers))
	for i, w := range out.Workers {
		ws[i] = WorkerInfo{int64(w.Worker), w.Held, w.Holder, int64(w.Fence), int64(w.UntilMs), w.ExpiresMs.ptr(), w.ExpiresInMs.ptr()}
	}
	return ws, nil
}

// WorkerLeaseConfig configures Client.WorkerLease.
type WorkerLeaseConfig struct {
	// TTL is the lease's time to live (default DefaultWorkerTTL); it is
	// renewed every third of it.
	TTL time.Duration
	// Max: worker ids are 0..Max-1 (default DefaultWorkerMax); every holder
	// of a group uses the same. At most 1024 for NextID's layout.
	Max int64
	// OnLost is called once, from the renewal goroutine, when the lease is lost.
	OnLost func(error)
}

// WorkerLease is a worker id of a group, taken lazily by the first call that
// needs it (Info, Worker, NextID) and renewed in a goroutine every third of
// its TTL. When a renewal is refused, or none succeeded before the lease
// expired, the lease is lost: Lost answers why, OnLost is called once, and
// NextID refuses at once (it also refuses once the lease's expiry passed
// without a renewal, before the renewal goroutine notices). Close releases it.
// One WorkerLease per process: Go programs do not fork, and a new process
// makes its own WorkerLease, so no two processes share a worker id.
type WorkerLease struct {
	c     *Client
	group string
	cfg   WorkerLeaseConfig

	mu       sync.Mutex
	info     *WorkerLeaseInfo
	acquire  *fetch // the lease request in flight
	lost     error
	closed   bool
	renewals int
	stop     chan struct{}
	stopped  chan struct{}

	// NextID's state
	idMu   sync.Mutex
	lastMs int64
	seq    int64
}

// WorkerLease answers a lazily taken, renewed worker id of group. It sends
// nothing yet; it fails for a negative TTL or a Max outside 0..1024.
func (c *Client) WorkerLease(group string, cfg WorkerLeaseConfig) (*WorkerLease, error) {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultWorkerTTL
	}
	if cfg.Max == 0 {
		cfg.Max = DefaultWorkerMax
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("keysmith: WorkerLeaseConfig.TTL must be positive, got %v", cfg.TTL)
	}
	if cfg.Max < 1 || cfg.Max > 1<<workerBits {
		return nil, fmt.Errorf("keysmith: WorkerLeaseConfig.Max must be in 1..%d (NextID's %d worker bits), got %d", 1<<workerBits, workerBits, cfg.Max)
	}
	return &WorkerLease{c: c, group: group, cfg: cfg}, nil
}

// Info answers the lease as last taken or renewed, taking it first if this
// is the first use. Errors: the lease's (ErrConflict when every worker id
// of the group is held), ErrLeaseLost once lost, ErrClosed after Close.
func (l *WorkerLease) Info(ctx context.Context) (WorkerLeaseInfo, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return WorkerLeaseInfo{}, &Error{Message: fmt.Sprintf("worker lease of group %q: closed", l.group), kind: ErrClosed}
		}
		if l.lost != nil {
			err := l.lost
			l.mu.Unlock()
			return WorkerLeaseInfo{}, err
		}
		if l.info != nil {
			info := *l.info
			l.mu.Unlock()
			return info, nil
		}
		f := l.acquire
		if f == nil {
			f = &fetch{done: make(chan struct{})}
			l.acquire = f
			go l.take(f)
		}
		l.mu.Unlock()
		if err := wait(ctx, f); err != nil {
			return WorkerLeaseInfo{}, err
		}
	}
}

// take leases the worker id (with the client's deadline, for every waiter).
func (l *WorkerLease) take(f *fetch) {
	info, err := l.c.LeaseWorker(context.Background(), l.group, l.cfg.TTL, l.cfg.Max)
	l.mu.Lock()
	l.acquire = nil
	f.err = err
	if err == nil {
		if l.closed {
			// closed while the lease was on its way: hand it back
			l.mu.Unlock()
			_, _ = l.c.ReleaseWorker(context.Background(), info.Group, info.Token)
			close(f.done)
			return
		}
		l.info = &info
		l.stop = make(chan struct{})
		l.stopped = make(chan struct{})
		go l.renewLoop(l.stop, l.stopped)
		l.c.mu.Lock()
		l.c.leases[l] = struct{}{}
		l.c.mu.Unlock()
	}
	l.mu.Unlock()
	close(f.done)
}

// Worker answers the worker id, taking the lease first if needed.
func (l *WorkerLease) Worker(ctx context.Context) (int64, error) {
	info, err := l.Info(ctx)
	return info.Worker, err
}

// Lost answers why the lease was lost (an error matching ErrLeaseLost), or nil.
func (l *WorkerLease) Lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Renewals answers how many renewals succeeded.
func (l *WorkerLease) Renewals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewals
}

// Usable answers whether an id with time timeMs (ms since 1970) may use the
// worker id now: the lease is taken, not lost, not closed, not past its
// expiry, and timeMs lies in NotBeforeMs..UntilMs.
func (l *WorkerLease) Usable(timeMs int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.usable(timeMs, time.Now().UnixMilli())
}

func (l *WorkerLease) usable(t, now int64) bool {
	return l.info != nil && l.lost == nil && !l.closed && now < l.info.ExpiresMs &&
		l.info.NotBeforeMs <= t && t < l.info.UntilMs
}

// Renew renews the lease now (the goroutine does so every third of the TTL).
// A refusal (ErrConflict) loses the lease; other errors leave it held until
// it expires.
func (l *WorkerLease) Renew(ctx context.Context) (WorkerLeaseInfo, error) {
	info, err := l.Info(ctx)
	if err != nil {
		return WorkerLeaseInfo{}, err
	}
	left := time.Until(time.UnixMilli(info.ExpiresMs))
	if left < minBackoff {
		left = minBackoff
	}
	renewed, err := l.c.renewWorker(ctx, info.Group, info.Token, 0, left)
	if err != nil {
		if errors.Is(err, ErrConflict) {
			l.lose(err)
		}
		return WorkerLeaseInfo{}, err
	}
	l.mu.Lock()
	if l.lost == nil {
		// also when closed meanwhile: Close releases the newest token
		l.info = &renewed
		l.renewals++
	}
	l.mu.Unlock()
	return renewed, nil
}

type lostError struct{ cause error }

func (e *lostError) Error() string {
	return "keysmith: worker lease lost; issue no more ids with its worker id: " + e.cause.Error()
}
func (e *lostError) Is(target error) bool { return target == ErrLeaseLost }
func (e *lostError) Unwrap() error        { return e.cause }

func (l *WorkerLease) lose(cause error) {
	l.mu.Lock()
	if l.lost != nil || l.closed {
		l.mu.Unlock()
		return
	}
	l.lost = &lostError{cause}
	err := l.lost
	l.mu.Unlock()
	if l.cfg.OnLost != nil {
		l.cfg.OnLost(err)
	}
}

func (l *WorkerLease) renewLoop(stop, stopped chan struct{}) {
	defer close(stopped)
	every := l.cfg.TTL / 3
	wait := every
	for {
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		_, err := l.Renew(context.Background())
		switch {
		case err == nil:
			wait = every
		case errors.Is(err, ErrConflict) || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrClosed):
			return
		default:
			l.mu.Lock()
			expired := l.info != nil && time.Now().UnixMilli() >= l.info.ExpiresMs
			l.mu.Unlock()
			if expired {
				l.lose(err)
				return
			}
			// try again soon: the lease expires unless a renewal succeeds
			wait = l.cfg.TTL / 10
		}
	}
}

// Close stops renewing and releases the worker id (its time floor stays).
// Idempotent; a lease never taken sends nothing.
func (l *WorkerLease) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	stop, stopped := l.stop, l.stopped
	l.mu.Unlock()
	if stop == nil {
		return nil
	}
	close(stop)
	<-stopped // a renewal under way has ended: its token is the one to release
	l.c.mu.Lock()
	delete(l.c.leases, l)
	l.c.mu.Unlock()
	l.mu.Lock()
	info, lost := l.info, l.lost
	l.mu.Unlock()
	if lost != nil || info == nil {
		return nil
	}
	_, err := l.c.ReleaseWorker(ctx, info.Group, info.Token)
	return err
}

// NextID's layout, the server's "snowflake" one: 41 bits of ms since
// IDEpochMs, 10 worker bits, 12 sequence bits.
const (
	// IDEpochMs is the epoch of NextID's ids: 2024-01-01T00:00:00Z, ms since 1970.
	IDEpochMs    = 1_704_067_200_000
	workerBits   = 10
	sequenceBits = 12
)

// NextID makes a time-ordered 64-bit id with the lease's worker id, in the
// server's snowflake layout (time << 22 | worker << 12 | sequence; decode it
// with DecodeID on a server with that layout). Ids of one WorkerLease
// increase. It takes the lease first if needed; it refuses at once with
// ErrLeaseLost once the lease is lost or its expiry passed unrenewed, with
// ErrClosed after Close, and with ErrUnavailable when the clock lies outside
// the lease's NotBeforeMs..UntilMs.
func (l *WorkerLease) NextID(ctx context.Context) (int64, error) {
	if _, err := l.Info(ctx); err != nil {
		return 0, err
	}
	l.idMu.Lock()
	defer l.idMu.Unlock()
	for {
		now := time.Now().UnixMilli()
		t := now
		if t < l.lastMs {
			t = l.lastMs // the clock went back: stay on the last ms
		}
		seq := int64(0)
		if t == l.lastMs {
			seq = l.seq + 1
			if seq >= 1<<sequenceBits {
				// this ms is used up: wait for the next one
				time.Sleep(time.Until(time.UnixMilli(t + 1)))
				continue
			}
		}
		l.mu.Lock()
		ok := l.usable(t, now)
		var worker int64
		var err error
		if ok {
			worker = l.info.Worker
		} else if l.closed {
			err = &Error{Message: fmt.Sprintf("worker lease of group %q: closed", l.group), kind: ErrClosed}
		} else if l.lost != nil {
			err = l.lost
		} else if now >= l.info.ExpiresMs {
			err = &lostError{fmt.Errorf("the lease expired at %d ms without a renewal", l.info.ExpiresMs)}
		} else {
			err = unavailable(fmt.Sprintf("worker %d of group %q may make ids with times in %d..%d ms, not %d",
				l.info.Worker, l.group, l.info.NotBeforeMs, l.info.UntilMs, t), "", nil)
		}
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
		l.lastMs, l.seq = t, seq
		return (t-IDEpochMs)<<(workerBits+sequenceBits) | worker<<sequenceBits | seq, nil
	}
}

// tokenBody is the body of a lease's renewal and release: the token travels
// there, never in a URL (proxies and access logs keep URLs).
type tokenBody struct {
	Token string `json:"token"`
}

// String says the lease without its token (a secret: it renews and
// releases the lease); %v and %+v use it.
func (i WorkerLeaseInfo) String() string {
	return fmt.Sprintf("WorkerLeaseInfo{Group:%q Worker:%d Fence:%d Max:%d NotBeforeMs:%d UntilMs:%d ExpiresMs:%d TTLMs:%d Token:***}",
		i.Group, i.Worker, i.Fence, i.Max, i.NotBeforeMs, i.UntilMs, i.ExpiresMs, i.TTLMs)
}

// GoString is String, for %#v.
func (i WorkerLeaseInfo) GoString() string { return i.String() }
