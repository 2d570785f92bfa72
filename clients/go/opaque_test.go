package keysmith

import (
	"errors"
	"strings"
	"testing"
)

// Opaque and encoded sequences, Decode and the JavaScript-safe bound against
// a real server (the same cases as the Python client's test_opaque.py).
func TestOpaqueEncodedAndDecode(t *testing.T) {
	s := startServer(t, "", "")
	c := newClient(t, Options{}, s.URL)
	name := uniqueName("opaque")
	must(c.CreateSequence(bg, name, SequenceOptions{Opaque: true, Encoding: "base62", Prefix: "usr", JSSafe: true}))(t)
	got := must(c.NextNumbers(bg, name, 10))(t)
	seen := map[string]bool{}
	for i, n := range got {
		v := string(n)
		if !strings.HasPrefix(v, "usr_") || len(v) != 4+9+1 || seen[v] {
			t.Fatalf("value %q", v)
		}
		seen[v] = true
		d := must(c.Decode(bg, name, v))(t)
		if d.Counter != int64(i+1) {
			t.Fatalf("%q decodes to %+v, want counter %d", v, d, i+1)
		}
	}
	if _, err := c.Decode(bg, name, strings.Replace(string(got[0]), "usr_", "ord_", 1)); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "prefix usr_") {
		t.Fatalf("a wrong prefix: %v", err)
	}
	js := uniqueName("js")
	if _, err := c.CreateSequence(bg, js, SequenceOptions{JSSafe: true, Max: Int64(1 << 53)}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a js-safe max above 2^53-1: %v", err)
	}
	if _, err := c.GetSequence(bg, js); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused create made %s: %v", js, err)
	}
}
