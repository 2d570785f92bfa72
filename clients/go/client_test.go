package keysmith

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var bg = context.Background()

func TestSequenceCacheAndPrefetch(t *testing.T) {
	s := startServer(t, "", "")
	c := newClient(t, Options{}, s.URL)
	name := uniqueName("cache")
	must(c.CreateSequence(bg, name, SequenceOptions{Block: Int64(100)}))(t)
	// a long target interval: the block stays 100 however fast the test runs
	seq := must(c.Sequence(name, SequenceConfig{TargetInterval: time.Hour, MinBlock: 100, MaxBlock: 100}))(t)
	if seq.Leases() != 0 {
		t.Fatal("a Sequence leased before the first value was asked for")
	}
	first := must(seq.Next(bg))(t)
	if first != 1 || seq.Leases() != 1 || seq.Available() != 99 {
		t.Fatalf("first value %d, %d leases, %d available; want 1, 1, 99", first, seq.Leases(), seq.Available())
	}
	// take down to a fifth of the lease: the next lease comes without another call
	vs := must(seq.NextN(bg, 79))(t)
	if vs[0] != 2 || vs[78] != 80 {
		t.Fatalf("NextN(79) = %d..%d, want 2..80", vs[0], vs[78])
	}
	waitFor(t, "the prefetch of a second lease", func() bool { return seq.Leases() == 2 })
	if got := seq.Available(); got != 120 {
		t.Fatalf("after the prefetch %d values are here, want 20 + 100", got)
	}
	info := must(c.GetSequence(bg, name))(t)
	if info.Next != 201 {
		t.Fatalf("the server's next is %d, want 201 (two leases of 100)", info.Next)
	}

	// many goroutines: every value once, increasing within each goroutine
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []int64
			for i := 0; i < 500; i++ {
				v, err := seq.Next(bg)
				if err != nil {
					errs <- err
					return
				}
				if len(mine) > 0 && v <= mine[len(mine)-1] {
					errs <- errors.New("values of one Sequence went back")
					return
				}
				mine = append(mine, v)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	noDuplicates(t, "8 goroutines on one Sequence", append(all, append(vs, first)...))
	if len(all) != 4000 {
		t.Fatalf("%d values, want 4000", len(all))
	}

	// Close hands the unused tail of the newest lease back; the server hands it out next
	if err := seq.Close(bg); err != nil {
		t.Fatal(err)
	}
	r := seq.Released()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if r == nil || r.Start <= all[len(all)-1] || r.Len() == 0 {
		t.Fatalf("Close released %+v; the highest value handed out is %d", r, all[len(all)-1])
	}
	if _, err := seq.Next(bg); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	l := must(c.Reserve(bg, name, 1))(t)
	if l.Ranges[0].Start != r.Start {
		t.Fatalf("after Close the server hands out %d, want %d (the tail came back)", l.Ranges[0].Start, r.Start)
	}
}

func TestExhaustion(t *testing.T) {
	s := startServer(t, "", "")
	c := newClient(t, Options{}, s.URL)
	name := uniqueName("small")
	must(c.CreateSequence(bg, name, SequenceOptions{Max: Int64(10), Block: Int64(4)}))(t)
	seq := must(c.Sequence(name, SequenceConfig{}))(t)
	var got []int64
	for {
		v, err := seq.Next(bg)
		if err != nil {
			if !errors.Is(err, ErrExhausted) || !errors.Is(err, ErrConflict) {
				t.Fatalf("after %v: %v, want ErrExhausted", got, err)
			}
			var ke *Error
			if !errors.As(err, &ke) || ke.Status != 409 || ke.Code != "exhausted" {
				t.Fatalf("exhaustion error %#v", err)
			}
			break
		}
		got = append(got, v)
	}
	if len(got) != 10 || got[0] != 1 || got[9] != 10 {
		t.Fatalf("values %v, want 1..10", got)
	}

	// NextN that cannot be served takes nothing: the values stay for the next call
	other := uniqueName("small")
	must(c.CreateSequence(bg, other, SequenceOptions{Max: Int64(3), Block: Int64(3)}))(t)
	seq2 := must(c.Sequence(other, SequenceConfig{}))(t)
	if v := must(seq2.Next(bg))(t); v != 1 {
		t.Fatalf("first value %d", v)
	}
	if _, err := seq2.NextN(bg, 5); !errors.Is(err, ErrExhausted) {
		t.Fatalf("NextN(5) with 2 left: %v, want ErrExhausted", err)
	}
	if vs := must(seq2.NextN(bg, 2))(t); vs[0] != 2 || vs[1] != 3 {
		t.Fatalf("after a failed NextN: %v, want [2 3]", vs)
	}

	// bad configurations say which field
	if _, err := c.Sequence(other, SequenceConfig{MinBlock: 10, MaxBlock: 5}); err == nil || !strings.Contains(err.Error(), "MinBlock") {
		t.Fatalf("MinBlock > MaxBlock: %v", err)
	}
	if _, err := seq2.NextN(bg, -1); err == nil || !strings.Contains(err.Error(), "n must not be negative") {
		t.Fatalf("NextN(-1): %v", err)
	}
	// a cancelled context ends a wait for a lease, taking nothing
	fresh := uniqueName("cancel")
	must(c.CreateSequence(bg, fresh, SequenceOptions{}))(t)
	seq3 := must(c.Sequence(fresh, SequenceConfig{}))(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := seq3.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
	if v := must(seq3.Next(bg))(t); v != 1 {
		t.Fatalf("after a cancelled wait the first value is %d, want 1", v)
	}
}

func TestRoutesAndErrors(t *testing.T) {
	s := startServer(t, "", "")
	c := newClient(t, Options{}, s.URL)
	name := uniqueName("routes")
	info := must(c.CreateSequence(bg, name, SequenceOptions{Start: Int64(1 << 62), Block: Int64(5)}))(t)
	if info.Name != name || info.Next != 1<<62 || info.Block != 5 {
		t.Fatalf("created %+v", info)
	}
	if _, err := c.CreateSequence(bg, name, SequenceOptions{}); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("a second create: %v, want ErrAlreadyExists", err)
	}
	vs := must(c.Next(bg, name, 2))(t)
	if vs[0] != 1<<62 || vs[1] != 1<<62+1 {
		t.Fatalf("Next = %v: values near 2^63 must be exact", vs)
	}
	if _, err := c.Next(bg, name, 0); err == nil || !strings.Contains(err.Error(), "count") {
		t.Fatalf("count 0: %v, want an error naming count", err)
	}
	_, err := c.GetSequence(bg, uniqueName("missing"))
	var ke *Error
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &ke) || ke.Status != 404 {
		t.Fatalf("an unknown sequence: %v", err)
	}
	if _, err := c.CreateSequence(bg, "a b", SequenceOptions{}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a bad name: %v, want ErrBadRequest", err)
	}
	if _, err := c.Alter(bg, name, AlterOptions{Next: Int64(5)}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("moving next back: %v, want ErrBadRequest", err)
	}
	altered := must(c.Alter(bg, name, AlterOptions{Next: Int64(1<<62 + 100)}))(t)
	if altered.Next != 1<<62+100 {
		t.Fatalf("altered %+v", altered)
	}
	lease := must(c.Reserve(bg, name, 10))(t)
	if lease.Len() != 10 || lease.Values()[0] != 1<<62+100 {
		t.Fatalf("lease %+v", lease)
	}
	r := must(c.Release(bg, lease, lease.Values()[4]))(t)
	if r == nil || r.Start != 1<<62+104 || r.Len() != 6 {
		t.Fatalf("released %+v", r)
	}
	list := must(c.ListSequences(bg))(t)
	found := false
	for _, s := range list {
		found = found || s.Name == name
	}
	if !found {
		t.Fatal("ListSequences misses the sequence")
	}
	if err := c.DropSequence(bg, name); err != nil {
		t.Fatal(err)
	}
	if err := c.DropSequence(bg, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second drop: %v", err)
	}

	// residue classes
	rc := uniqueName("class")
	must(c.CreateSequence(bg, rc, SequenceOptions{Increment: Int64(3), Offset: Int64(1)}))(t)
	seq := must(c.Sequence(rc, SequenceConfig{}))(t)
	got := must(seq.NextN(bg, 4))(t)
	for i, v := range got {
		if v%3 != 1 || (i > 0 && v <= got[i-1]) {
			t.Fatalf("residue class values %v", got)
		}
	}

	// gap-free numbers with tickets
	inv := uniqueName("invoices")
	must(c.CreateSequence(bg, inv, SequenceOptions{Gapless: true, Period: "year", Format: "INV-{period}-{n:04}"}))(t)
	tk := must(c.TakeTicket(bg, inv, 60))(t)
	if !strings.HasPrefix(string(tk.Value), "INV-") || tk.N != 1 || tk.Period == nil {
		t.Fatalf("ticket %+v", tk)
	}
	if got := must(c.CommitTicket(bg, inv, tk.Ticket))(t); got != tk.Value {
		t.Fatalf("committed %q, want %q", got, tk.Value)
	}
	if _, err := c.CommitTicket(bg, inv, tk.Ticket); !errors.Is(err, ErrTicketRefused) {
		t.Fatalf("a second commit: %v, want ErrTicketRefused", err)
	}
	t2 := must(c.TakeTicket(bg, inv, 0))(t)
	must(c.ReleaseTicket(bg, inv, t2.Ticket))(t)
	t3 := must(c.TakeTicket(bg, inv, 0))(t)
	if t3.N != t2.N {
		t.Fatalf("a released number is taken next: got %d, want %d", t3.N, t2.N)
	}
	parts := must(c.Parse(bg, inv, string(tk.Value)))(t)
	if parts.N != 1 || parts.Period == nil || *parts.Period != *tk.Period {
		t.Fatalf("parsed %+v", parts)
	}
	if _, err := c.Next(bg, inv, 1); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("next on a gap-free sequence: %v, want ErrWrongKind", err)
	}

	// pools, counters, ids, health
	pool := uniqueName("pool")
	p := must(c.CreatePool(bg, pool, 100, PoolOptions{Start: Int64(1000)}))(t)
	if p.Start != 1000 || p.Size != 100 {
		t.Fatalf("pool %+v", p)
	}
	nums := must(c.PoolNext(bg, pool, 5))(t)
	noDuplicates(t, "pool", nums)
	if g := must(c.GetPool(bg, pool))(t); g.Taken == nil || *g.Taken != 5 {
		t.Fatalf("pool after 5 taken: %+v", g)
	}
	if len(must(c.ListPools(bg))(t)) == 0 {
		t.Fatal("ListPools is empty")
	}
	if err := c.DropPool(bg, pool); err != nil {
		t.Fatal(err)
	}
	names := must(c.CounterNext(bg, 2))(t)
	if names.Host != "testhost" || len(names.Names) != 2 || names.Last != names.First+1 {
		t.Fatalf("counter names %+v", names)
	}
	ids := must(c.NextIDs(bg, 3))(t)
	if !(ids[0] < ids[1] && ids[1] < ids[2]) {
		t.Fatalf("ids %v do not increase", ids)
	}
	d := must(c.DecodeID(bg, ids[0]))(t)
	if d.ID != ids[0] || d.TimeMs < IDEpochMs || d.Time == "" {
		t.Fatalf("decoded %+v", d)
	}
	uuids := must(c.NextUUIDs(bg, 200))(t)
	for i, u := range uuids {
		if len(u) != 36 || u[14] != '7' || !strings.ContainsRune("89ab", rune(u[19])) {
			t.Fatalf("%q is not a version-7 UUID of the RFC variant", u)
		}
		if i > 0 && !(uuids[i-1] < u) {
			t.Fatalf("UUIDs do not increase: %q then %q", uuids[i-1], u)
		}
		// The worker id: bits 66..88, after the variant.
		hex := strings.ReplaceAll(u, "-", "")
		low, err := strconv.ParseUint(hex[16:32], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		if w := int64(low>>40) & 0x3fffff; w != d.Worker {
			t.Fatalf("%q has worker %d, the server's is %d", u, w, d.Worker)
		}
	}
	if _, err := c.NextUUIDs(bg, 0); err == nil {
		t.Fatal("NextUUIDs(0) did not fail")
	}
	key := must(c.ShardKeyEncode(bg, "e", 3, 42))(t)
	back := must(c.ShardKeyDecode(bg, key.External, "e", ""))(t)
	if back.External != key.External {
		t.Fatalf("shard key %+v decoded as %+v", key, back)
	}
	if h := must(c.Health(bg))(t); len(h) == 0 {
		t.Fatal("empty health")
	}
	if st := must(c.Status(bg))(t); len(st) == 0 {
		t.Fatal("empty status")
	}
}

func TestBadToken(t *testing.T) {
	s := startServer(t, "", "s3cret")
	name := uniqueName("auth")
	for _, token := range []string{"", "wrong"} {
		c := newClient(t, Options{Token: token}, s.URL)
		_, err := c.CreateSequence(bg, name, SequenceOptions{})
		var ke *Error
		if !errors.Is(err, ErrUnauthorized) || !errors.As(err, &ke) || ke.Status != 401 {
			t.Fatalf("token %q: %v, want ErrUnauthorized", token, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatal("an error shows the token")
		}
	}
	c := newClient(t, Options{Token: "s3cret"}, s.URL)
	must(c.CreateSequence(bg, name, SequenceOptions{}))(t)
	seq := must(c.Sequence(name, SequenceConfig{}))(t)
	if v := must(seq.Next(bg))(t); v != 1 {
		t.Fatalf("first value %d", v)
	}
}

func TestFailoverWhileAServerIsKilled(t *testing.T) {
	store := filepath.Join(t.TempDir(), "k.db")
	a := startServer(t, store, "")
	b := startServer(t, store, "")
	c := newClient(t, Options{Deadline: 20 * time.Second}, a.URL, b.URL)
	name := uniqueName("failover")
	must(c.CreateSequence(bg, name, SequenceOptions{Block: Int64(10)}))(t)
	seq := must(c.Sequence(name, SequenceConfig{MinBlock: 10, MaxBlock: 10}))(t)

	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	killed := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				if g == 0 && i == 100 {
					a.kill() // the server every call went to so far
					close(killed)
				}
				v, err := seq.Next(bg)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, v)
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a call failed although the second server was up: %v", err)
	}
	<-killed
	noDuplicates(t, "across a failover", all)
	if len(all) != 1200 {
		t.Fatalf("%d values, want 1200", len(all))
	}
	// plain calls fail over too, and a URL that refuses connections is passed over
	dead := "http://127.0.0.1:" + a.port
	c2 := newClient(t, Options{}, dead, b.URL)
	vs := must(c2.Next(bg, name, 3))(t)
	noDuplicates(t, "plain calls", append(all, vs...))
	// the tail goes back through the live server
	if err := seq.Close(bg); err != nil {
		t.Fatal(err)
	}
	// no server at all: ErrUnavailable once the deadline passed
	b.kill()
	c3 := newClient(t, Options{Deadline: 300 * time.Millisecond}, dead)
	if _, err := c3.Next(bg, name, 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no server: %v, want ErrUnavailable", err)
	}
	// a cancelled context ends a call at once
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := c.Next(ctx, name, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

type certs struct{ dir string }

func (c certs) path(n string) string { return filepath.Join(c.dir, n) }

func makeCerts(t *testing.T) certs {
	dir := t.TempDir()
	out, err := exec.Command("bash", filepath.Join("..", "tls-test-certs.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("tls-test-certs.sh: %v\n%s", err, out)
	}
	return certs{dir}
}

func TestTLS(t *testing.T) {
	cs := makeCerts(t)
	tlsArgs := []string{"--tls-cert", cs.path("server.pem"), "--tls-key", cs.path("server-key.pem")}
	https := startServer(t, "", "", tlsArgs...)
	if !strings.HasPrefix(https.URL, "https://") {
		t.Fatalf("server URL %s", https.URL)
	}
	c := newClient(t, Options{CAFile: cs.path("ca.pem")}, https.URL)
	name := uniqueName("tls")
	must(c.CreateSequence(bg, name, SequenceOptions{Start: Int64(10)}))(t)
	seq := must(c.Sequence(name, SequenceConfig{}))(t)
	if vs := must(seq.NextN(bg, 3))(t); vs[0] != 10 || vs[2] != 12 {
		t.Fatalf("over TLS: %v", vs)
	}
	// a CA that did not sign the server's certificate: refused
	other := newClient(t, Options{CAFile: cs.path("other-ca.pem"), Deadline: time.Second}, https.URL)
	if _, err := other.Health(bg); !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an untrusted server: %v", err)
	}

	// a server that requires a client certificate
	mtls := startServer(t, "", "", append(tlsArgs, "--client-ca", cs.path("ca.pem"))...)
	// TLS 1.3: the server refuses a missing certificate after the client's side of the
	// handshake ended: its alert (ErrSetup) or, when it closed first, a broken connection
	without := newClient(t, Options{CAFile: cs.path("ca.pem"), Deadline: time.Second}, mtls.URL)
	if _, err := without.CreateSequence(bg, name, SequenceOptions{}); !errors.Is(err, ErrSetup) && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no client certificate: %v", err)
	}
	with := newClient(t, Options{CAFile: cs.path("ca.pem"), CertFile: cs.path("client.pem"), KeyFile: cs.path("client-key.pem")}, mtls.URL)
	must(with.CreateSequence(bg, name, SequenceOptions{}))(t)
	if vs := must(with.Next(bg, name, 2))(t); vs[0] != 1 || vs[1] != 2 {
		t.Fatalf("with a client certificate: %v", vs)
	}

	// bad TLS options say which
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{KeyFile: cs.path("client-key.pem")}, "KeyFile needs Options.CertFile"},
		{Options{CAFile: filepath.Join(cs.dir, "missing.pem")}, "Options.CAFile="},
		{Options{CertFile: cs.path("client.pem"), KeyFile: cs.path("server-key.pem")}, "Options.CertFile="},
	} {
		if _, err := New([]string{"https://127.0.0.1:1"}, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: %v, want an error naming %q", tc.o, err, tc.want)
		}
	}
	if _, err := New(nil, Options{}); err == nil || !strings.Contains(err.Error(), "urls") {
		t.Fatalf("no URL: %v", err)
	}
	if _, err := New([]string{"127.0.0.1:7878"}, Options{}); err == nil || !strings.Contains(err.Error(), "urls[0]") {
		t.Fatalf("a URL without scheme: %v", err)
	}
	if _, err := os.Stat(cs.path("ca.pem")); err != nil {
		t.Fatal(err)
	}
}

// NextRange takes n consecutive values in one step; when the block holds
// fewer, they stay a gap and the range comes from the next lease.
func TestNextRange(t *testing.T) {
	s := startServer(t, "", "")
	c := newClient(t, Options{}, s.URL)
	name := uniqueName("range")
	must(c.CreateSequence(bg, name, SequenceOptions{Block: Int64(100)}))(t)
	seq := must(c.Sequence(name, SequenceConfig{TargetInterval: time.Hour, MinBlock: 100, MaxBlock: 100}))(t)
	if v := must(seq.Next(bg))(t); v != 1 {
		t.Fatalf("first value %d", v)
	}
	if r := must(seq.NextRange(bg, 10))(t); r.Start != 2 || r.Len() != 10 || r.Step != 1 {
		t.Fatalf("NextRange(10) = %+v, want 2..11", r)
	}
	// 89 left in the block: the range comes whole from the next lease
	r := must(seq.NextRange(bg, 95))(t)
	if r.Start <= 11 || r.Len() != 95 {
		t.Fatalf("NextRange(95) = %+v (len %d), want 95 values above 11", r, r.Len())
	}
	last := r.Start + (r.Len()-1)*r.Step
	if v := must(seq.Next(bg))(t); v <= last {
		t.Fatalf("Next after the range: %d, want above %d", v, last)
	}
	for _, n := range []int64{0, -1, 101} {
		if _, err := seq.NextRange(bg, n); err == nil || !strings.Contains(err.Error(), "MaxBlock") {
			t.Fatalf("NextRange(%d): %v, want an error naming MaxBlock", n, err)
		}
	}
	if err := seq.Close(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := seq.NextRange(bg, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("NextRange after Close: %v, want ErrClosed", err)
	}
}
