package keysmith

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// server is one real `keysmith --store sqlite://DB serve` process on 127.0.0.1.
type server struct {
	t     testing.TB
	bin   string
	store string
	token string
	args  []string
	cmd   *exec.Cmd
	exit  chan struct{}
	URL   string
	port  string
}

func keysmithBin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("KEYSMITH_BIN")
	if bin == "" {
		t.Fatal("KEYSMITH_BIN is not set: build the server (cargo build -p keysmith-cli) and set KEYSMITH_BIN to target/debug/keysmith")
	}
	return bin
}

// startServer starts a server on store (a new temp store when empty); it is
// stopped when the test ends.
func startServer(t testing.TB, store, token string, args ...string) *server {
	t.Helper()
	if store == "" {
		store = filepath.Join(t.TempDir(), "k.db")
	}
	s := &server{t: t, bin: keysmithBin(t), store: store, token: token, args: args}
	s.start("0")
	t.Cleanup(s.stop)
	return s
}

var listening = regexp.MustCompile(`(https?)://127\.0\.0\.1:(\d+)`)

func (s *server) start(port string) {
	s.t.Helper()
	counters := filepath.Join(filepath.Dir(s.store), "counters")
	if err := os.MkdirAll(counters, 0o755); err != nil {
		s.t.Fatal(err)
	}
	argv := append([]string{"--store", "sqlite://" + s.store, "serve", "--listen", "127.0.0.1:" + port,
		"--counter-dir", counters, "--counter-host", "testhost"}, s.args...)
	cmd := exec.Command(s.bin, argv...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KEYSMITH_") {
			env = append(env, kv)
		}
	}
	env = append(env, "KEYSMITH_SHARD_KEY_SECRET=a test secret of more than sixteen bytes",
		"KEYSMITH_LEASE_SECRET=another test secret, for lease tokens")
	if s.token != "" {
		env = append(env, "KEYSMITH_TOKEN="+s.token)
	}
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("cannot start %s: %v", s.bin, err)
	}
	r := bufio.NewReader(stderr)
	first, _ := r.ReadString('\n')
	m := listening.FindStringSubmatch(first)
	if m == nil {
		rest := new(strings.Builder)
		_, _ = bufio.NewReader(r).WriteTo(rest)
		_ = cmd.Wait()
		s.t.Fatalf("keysmith serve did not start: %s%s", first, rest)
	}
	s.cmd, s.URL, s.port = cmd, m[1]+"://127.0.0.1:"+m[2], m[2]
	s.exit = make(chan struct{})
	go func(exit chan struct{}) {
		// drain stderr so the server never blocks on a full pipe
		_, _ = bufio.NewReader(r).WriteTo(discard{})
		_ = cmd.Wait()
		close(exit)
	}(s.exit)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// kill: SIGKILL, no graceful shutdown.
func (s *server) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exit
		s.cmd = nil
	}
}

// stop: SIGTERM, SIGKILL when it has not exited within 10 s.
func (s *server) stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exit:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Signal(syscall.SIGKILL)
			<-s.exit
		}
		s.cmd = nil
	}
}

func newClient(t *testing.T, o Options, urls ...string) *Client {
	t.Helper()
	c, err := New(urls, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// uniqueName: a name no other test uses, with a "/" (sent as %2F).
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "/" + hex.EncodeToString(b)
}

// waitFor polls cond until it holds; the bound is on a hang, not a timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	until := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(until) {
			t.Fatalf("never: %s", what)
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond)
	}
}

// must(f())(t) answers f's value, failing the test on f's error.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func noDuplicates(t *testing.T, what string, vs []int64) {
	t.Helper()
	seen := make(map[int64]struct{}, len(vs))
	for _, v := range vs {
		if _, ok := seen[v]; ok {
			t.Fatalf("%s: %d handed out twice", what, v)
		}
		seen[v] = struct{}{}
	}
}
