package keysmith

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func TestWorkerLeaseIsLazyRenewsAndNeverShares(t *testing.T) {
	s := startServer(t, "", "")
	c := newClient(t, Options{}, s.URL)
	group := uniqueName("workers")
	var leases []*WorkerLease
	for i := 0; i < 6; i++ {
		leases = append(leases, must(c.WorkerLease(group, WorkerLeaseConfig{TTL: 1500 * time.Millisecond, Max: 8}))(t))
	}
	if ws := must(c.ListWorkers(bg, group))(t); len(ws) != 0 {
		t.Fatalf("a WorkerLease leased before its first use: %+v", ws)
	}
	// six goroutines make ids at once, each with its own lease
	ids := make([][]int64, len(leases))
	var wg sync.WaitGroup
	errs := make(chan error, len(leases))
	for i, l := range leases {
		wg.Add(1)
		go func(i int, l *WorkerLease) {
			defer wg.Done()
			for k := 0; k < 2000; k++ {
				id, err := l.NextID(bg)
				if err != nil {
					errs <- err
					return
				}
				if k > 0 && id <= ids[i][k-1] {
					errs <- errors.New("ids of one lease went back")
					return
				}
				ids[i] = append(ids[i], id)
			}
		}(i, l)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	workers := map[int64]bool{}
	var all []int64
	for i, l := range leases {
		w := must(l.Worker(bg))(t)
		if workers[w] {
			t.Fatalf("worker id %d held twice", w)
		}
		workers[w] = true
		for _, id := range ids[i] {
			if got := (id >> sequenceBits) & (1<<workerBits - 1); got != w {
				t.Fatalf("id %d carries worker %d, the lease holds %d", id, got, w)
			}
		}
		all = append(all, ids[i]...)
	}
	noDuplicates(t, "ids of six leases", all)
	d := must(c.DecodeID(bg, ids[0][0]))(t)
	if w := must(leases[0].Worker(bg))(t); d.Worker != w {
		t.Fatalf("the server decodes worker %d, the lease holds %d", d.Worker, w)
	}

	first := map[*WorkerLease]int64{}
	for _, l := range leases {
		first[l] = must(l.Info(bg))(t).UntilMs
	}
	waitFor(t, "three renewals of each lease", func() bool {
		for _, l := range leases {
			if err := l.Lost(); err != nil {
				t.Fatalf("lost: %v", err)
			}
			if l.Renewals() < 3 {
				return false
			}
		}
		return true
	})
	for _, l := range leases {
		if must(l.Info(bg))(t).UntilMs <= first[l] {
			t.Fatal("renewals did not move the time floor forward")
		}
		if !l.Usable(time.Now().UnixMilli()) {
			t.Fatal("a renewed lease is not usable")
		}
	}
	for _, l := range leases {
		if err := l.Close(bg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := leases[0].NextID(bg); !errors.Is(err, ErrClosed) {
		t.Fatalf("NextID after Close: %v, want ErrClosed", err)
	}
	for _, w := range must(c.ListWorkers(bg, group))(t) {
		if w.Held {
			t.Fatalf("worker %d still held after Close", w.Worker)
		}
	}
}

func TestALostLeaseStopsIssuingAtOnce(t *testing.T) {
	s := startServer(t, "", "")
	c := newClient(t, Options{Deadline: 2 * time.Second}, s.URL)
	group := uniqueName("lost")
	lostCh := make(chan error, 2)
	l := must(c.WorkerLease(group, WorkerLeaseConfig{TTL: 600 * time.Millisecond, Max: 1, OnLost: func(e error) { lostCh <- e }}))(t)
	before := must(l.NextID(bg))(t)
	info := must(l.Info(bg))(t)
	// every worker id of the group is held: a second lease is refused
	if _, err := c.LeaseWorker(bg, group, 0, 1); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second lease of a group of one: %v", err)
	}
	s.kill()
	// NextID refuses once the expiry passed, whether or not the renewal
	// goroutine has noticed yet
	waitFor(t, "NextID refused", func() bool {
		_, err := l.NextID(bg)
		return err != nil
	})
	if _, err := l.NextID(bg); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("NextID of an expired lease: %v, want ErrLeaseLost", err)
	}
	err := <-lostCh
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(l.Lost(), ErrLeaseLost) {
		t.Fatalf("OnLost got %v, Lost() %v", err, l.Lost())
	}
	if l.Usable(time.Now().UnixMilli()) {
		t.Fatal("a lost lease is usable")
	}
	// the next holder starts above the lost one's time floor
	s.start(s.port)
	var again WorkerLeaseInfo
	waitFor(t, "the worker id free again", func() bool {
		got, err := c.LeaseWorker(bg, group, 0, 1)
		again = got
		return err == nil
	})
	if again.Worker != 0 || again.Fence != info.Fence+1 || again.NotBeforeMs < info.UntilMs {
		t.Fatalf("next holder %+v after %+v", again, info)
	}
	if before >= (again.NotBeforeMs-IDEpochMs)<<(workerBits+sequenceBits) {
		t.Fatal("an id of the lost lease lies above the next holder's floor")
	}
	if len(lostCh) != 0 {
		t.Fatal("OnLost called twice")
	}
}

func TestWorkerRoutes(t *testing.T) {
	s := startServer(t, "", "")
	c := newClient(t, Options{}, s.URL)
	group := uniqueName("plain")
	a := must(c.LeaseWorker(bg, group, time.Minute, 2))(t)
	b := must(c.LeaseWorker(bg, group, time.Minute, 2))(t)
	if a.Worker+b.Worker != 1 || a.NotBeforeMs >= a.UntilMs {
		t.Fatalf("leases %+v %+v", a, b)
	}
	if _, err := c.LeaseWorker(bg, group, 0, 2); !errors.Is(err, ErrConflict) {
		t.Fatalf("a third lease of two: %v", err)
	}
	r := must(c.RenewWorker(bg, group, a.Token, 0))(t)
	if r.Worker != a.Worker || r.Fence != a.Fence {
		t.Fatalf("renewed %+v", r)
	}
	if !must(c.ReleaseWorker(bg, group, r.Token))(t) {
		t.Fatal("release answered false")
	}
	again := must(c.LeaseWorker(bg, group, time.Minute, 2))(t)
	if again.Worker != a.Worker || again.Fence != a.Fence+1 || again.NotBeforeMs < r.UntilMs {
		t.Fatalf("the released worker id taken again: %+v after %+v", again, r)
	}
	if _, err := c.RenewWorker(bg, group, r.Token, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("renewing a lease released and taken by another: %v", err)
	}
	if _, err := c.RenewWorker(bg, group, "forged.token", 0); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a forged token: %v", err)
	}
	ws := must(c.ListWorkers(bg, group))(t)
	if len(ws) != 2 || ws[0].Worker != 0 || ws[1].Worker != 1 {
		t.Fatalf("listed %+v", ws)
	}
	for _, w := range ws {
		if w.Holder != nil && (*w.Holder == a.Token || *w.Holder == b.Token) {
			t.Fatal("a listing shows a token")
		}
	}
	if _, err := c.WorkerLease(group, WorkerLeaseConfig{Max: 5000}); err == nil {
		t.Fatal("Max 5000 accepted for NextID's 10 worker bits")
	}
}
