package keysmith

import (
	"context"
	"net/http"
	"testing"
)

// A client of a follower follows its 421 not_leader to the leader: values
// in call order.
func TestLeaderFollowedFromAFollower(t *testing.T) {
	a := startServer(t, "", "")
	b := startServer(t, a.store, "")
	ctx := context.Background()
	ca, err := New([]string{a.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := New([]string{b.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.CreateSequence(ctx, "led", SequenceOptions{Order: "leader"}); err != nil {
		t.Fatal(err)
	}
	first, err := ca.Next(ctx, "led", 2) // a leads from here on
	if err != nil || len(first) != 2 || first[0] != 1 || first[1] != 2 {
		t.Fatalf("first: %v %v", first, err)
	}
	resp, err := http.Post(b.URL+"/v1/sequences/led/next", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("Keysmith-Leader") != a.URL {
		t.Fatalf("follower answered %d naming %q", resp.StatusCode, resp.Header.Get("Keysmith-Leader"))
	}
	prev := first[1]
	for i := 0; i < 5; i++ {
		v, err := cb.Next(ctx, "led", 1)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] <= prev {
			t.Fatalf("%d after %d", v[0], prev)
		}
		prev = v[0]
	}
}
