package keysmith

import (
	"sync/atomic"
	"testing"
	"time"
)

// Values/s from a Sequence's local cache and ids/s over a worker lease,
// beside a bare atomic counter, in one run against a real server:
//
//	KEYSMITH_BIN=... go test -run '^$' -bench . -benchtime 2s
//
// ns/op is per value; "values/s" is reported beside it.

// measure resets the timer; the function it answers reports values/s.
func measure(b *testing.B) func() {
	b.ResetTimer()
	start := time.Now()
	return func() {
		b.StopTimer()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "values/s")
	}
}

func BenchmarkBareAtomic(b *testing.B) {
	var n atomic.Int64
	report := measure(b)
	for i := 0; i < b.N; i++ {
		n.Add(1)
	}
	report()
}

// benchServer: a server of this benchmark alone, stopped when it ends.
func benchServer(b *testing.B) string { return startServer(b, "", "").URL }

func BenchmarkSequenceNext(b *testing.B) {
	url := benchServer(b)
	c, err := New([]string{url}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(bg)
	name := uniqueName("bench")
	if _, err := c.CreateSequence(bg, name, SequenceOptions{Block: Int64(10_000)}); err != nil {
		b.Fatal(err)
	}
	seq, err := c.Sequence(name, SequenceConfig{MinBlock: 1000})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := seq.Next(bg); err != nil { // the first lease is not what is measured
		b.Fatal(err)
	}
	report := measure(b)
	for i := 0; i < b.N; i++ {
		if _, err := seq.Next(bg); err != nil {
			b.Fatal(err)
		}
	}
	report()
	b.ReportMetric(float64(seq.Leases()), "leases")
}

func BenchmarkSequenceNextParallel(b *testing.B) {
	url := benchServer(b)
	c, err := New([]string{url}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(bg)
	name := uniqueName("bench")
	if _, err := c.CreateSequence(bg, name, SequenceOptions{Block: Int64(10_000)}); err != nil {
		b.Fatal(err)
	}
	seq, _ := c.Sequence(name, SequenceConfig{MinBlock: 1000})
	report := measure(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := seq.Next(bg); err != nil {
				b.Error(err)
				return
			}
		}
	})
	report()
}

func BenchmarkWorkerLeaseNextID(b *testing.B) {
	url := benchServer(b)
	c, err := New([]string{url}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(bg)
	l, err := c.WorkerLease(uniqueName("bench"), WorkerLeaseConfig{TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.NextID(bg); err != nil {
		b.Fatal(err)
	}
	report := measure(b)
	for i := 0; i < b.N; i++ {
		if _, err := l.NextID(bg); err != nil {
			b.Fatal(err)
		}
	}
	report()
}
