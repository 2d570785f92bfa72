// Command bench measures the Go client against a running keysmith server
// without a token, beside the bare loop it is compared with, in one run:
//
//	go run ./cmd/bench --url http://127.0.0.1:7878 --sequence NAME --seconds 2 --threads 8
//
// NAME must exist. It prints only lines "<case>\t<per_second>" on stdout,
// for the cases bare (atomic.AddInt64, one goroutine), bare_8 (--threads
// goroutines on one counter), next (cached Sequence.Next, one goroutine,
// leases of up to the server's --max-count unless --max-block says less),
// next_8 (--threads goroutines on one Sequence), next_n100 (values/s
// through NextRange(100)), worker_ids (ids/s over a worker lease), request
// (one HTTP request per value, Client.Next) and livez (a keep-alive GET
// /livez loop with the same HTTP settings).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"keysmith"
)

func main() {
	url := flag.String("url", "", "the server's URL (no token)")
	name := flag.String("sequence", "", "an existing sequence")
	seconds := flag.Float64("seconds", 2, "seconds per case")
	threads := flag.Int("threads", 8, "goroutines of the _8 cases")
	maxBlock := flag.Int64("max-block", 0, "the Sequence's largest lease (default: the server's --max-count, from /openapi.json)")
	flag.Parse()
	if *url == "" || *name == "" || *seconds <= 0 || *threads < 1 {
		fmt.Fprintln(os.Stderr, "usage: bench --url URL --sequence NAME [--seconds S] [--threads N] [--max-block B]")
		os.Exit(2)
	}
	d := time.Duration(*seconds * float64(time.Second))
	ctx := context.Background()
	c, err := keysmith.New([]string{*url}, keysmith.Options{})
	check(err)
	defer c.Close(ctx)

	if *maxBlock == 0 {
		*maxBlock = serverMaxCount(*url)
	}

	var counter int64
	emit("bare", run(d, 1, func() { atomic.AddInt64(&counter, 1) }))
	emit("bare_8", run(d, *threads, func() { atomic.AddInt64(&counter, 1) }))

	seq, err := c.Sequence(*name, keysmith.SequenceConfig{Block: *maxBlock, MaxBlock: *maxBlock})
	check(err)
	_, err = seq.Next(ctx) // the first lease is not what is measured
	check(err)
	next := func() {
		if _, err := seq.Next(ctx); err != nil {
			check(err)
		}
	}
	emit("next", run(d, 1, next))
	emit("next_8", run(d, *threads, next))
	emit("next_n100", 100*run(d, 1, func() {
		if _, err := seq.NextRange(ctx, 100); err != nil {
			check(err)
		}
	}))
	check(seq.Close(ctx))

	group := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	wl, err := c.WorkerLease(group, keysmith.WorkerLeaseConfig{TTL: time.Minute})
	check(err)
	_, err = wl.NextID(ctx)
	check(err)
	emit("worker_ids", run(d, 1, func() {
		if _, err := wl.NextID(ctx); err != nil {
			check(err)
		}
	}))
	check(wl.Close(ctx))

	emit("request", run(d, 1, func() {
		if _, err := c.Next(ctx, *name, 1); err != nil {
			check(err)
		}
	}))
	// the same transport settings as the client's own
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	hc := &http.Client{Transport: tr}
	livez := strings.TrimRight(*url, "/") + "/livez"
	emit("livez", run(d, 1, func() {
		resp, err := hc.Get(livez)
		check(err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			check(fmt.Errorf("GET /livez: %s", resp.Status))
		}
	}))
}

// serverMaxCount answers the largest count the server's reserve route takes
// (its --max-count, in /openapi.json), or 100000 when it says none.
func serverMaxCount(base string) int64 {
	resp, err := http.Get(strings.TrimRight(base, "/") + "/openapi.json")
	if err != nil {
		return 100_000
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string `json:"name"`
				Schema struct {
					Maximum int64 `json:"maximum"`
				} `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return 100_000
	}
	for _, p := range doc.Paths["/v1/sequences/{name}/reserve"]["post"].Parameters {
		if p.Name == "count" && p.Schema.Maximum > 0 {
			return p.Schema.Maximum
		}
	}
	return 100_000
}

func emit(name string, perSecond float64) { fmt.Printf("%s\t%.0f\n", name, perSecond) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run calls op from n goroutines for d; answers calls per second. Each
// goroutine looks at the clock once per batch of calls.
func run(d time.Duration, n int, op func()) float64 {
	var total int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine int64
			for batch := int64(1); !stop.Load(); {
				t := time.Now()
				for i := int64(0); i < batch; i++ {
					op()
				}
				mine += batch
				// batches of about a millisecond: the clock is read rarely
				if time.Since(t) < time.Millisecond && batch < 1<<20 {
					batch *= 2
				}
				if time.Since(start) >= d {
					stop.Store(true)
				}
			}
			atomic.AddInt64(&total, mine)
		}()
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}
