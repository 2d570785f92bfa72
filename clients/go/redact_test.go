package keysmith

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// secretToken stands for a worker lease's token: what no error may say.
const secretToken = "wl1.SECRETt0kenNeverInErrors"

// noToken fails when err, or any error in its Unwrap chain, says the token
// (Error(), %v, %+v, a *url.Error's URL).
func noToken(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for depth, e := 0, err; e != nil; depth, e = depth+1, errors.Unwrap(e) {
		for _, s := range []string{e.Error(), fmt.Sprintf("%v", e), fmt.Sprintf("%+v", e)} {
			if strings.Contains(s, secretToken) {
				t.Fatalf("%s: the error at depth %d (%T) says the lease token: %s", what, depth, e, s)
			}
		}
		if ue, ok := e.(*url.Error); ok && strings.Contains(ue.URL, secretToken) {
			t.Fatalf("%s: the *url.Error at depth %d holds the lease token in its URL: %s", what, depth, ue.URL)
		}
	}
}

// renewAndRelease: the errors of RenewWorker and ReleaseWorker with the secret token.
func renewAndRelease(t *testing.T, c *Client) map[string]error {
	t.Helper()
	_, renew := c.RenewWorker(bg, "g/1", secretToken, 0)
	_, release := c.ReleaseWorker(bg, "g/1", secretToken)
	return map[string]error{"renew": renew, "release": release}
}

func TestErrorsNeverSayAWorkerLeaseToken(t *testing.T) {
	opts := Options{Deadline: 400 * time.Millisecond, Timeout: 200 * time.Millisecond}

	t.Run("an answer that is not JSON", func(t *testing.T) {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("not json"))
		}))
		defer s.Close()
		for what, err := range renewAndRelease(t, newClient(t, opts, s.URL)) {
			noToken(t, what, err)
			var ke *Error
			if !errors.As(err, &ke) || ke.Code != "bad_response" {
				t.Fatalf("%s: want a bad_response *Error, got %#v", what, err)
			}
			if !strings.Contains(err.Error(), "/v1/workers/g%2F1/lease/"+what) {
				t.Fatalf("%s: the message does not name the redacted path: %v", what, err)
			}
		}
	})

	t.Run("a server that says the path in its error", func(t *testing.T) {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprintf(w, `{"error":{"code":"no_route","message":"no route %s"}}`, r.URL.EscapedPath())
		}))
		defer s.Close()
		for what, err := range renewAndRelease(t, newClient(t, opts, s.URL)) {
			noToken(t, what, err)
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "/lease/"+what) {
				t.Fatalf("%s: want the server's 404 with the redacted path, got %v", what, err)
			}
		}
	})

	t.Run("a server that hangs up", func(t *testing.T) {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		defer s.Close()
		for what, err := range renewAndRelease(t, newClient(t, opts, s.URL)) {
			noToken(t, what, err)
			transportError(t, what, err)
		}
	})

	t.Run("a server that answers too late", func(t *testing.T) {
		done := make(chan struct{})
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-done:
			case <-r.Context().Done():
			}
		}))
		defer s.Close()
		defer close(done)
		for what, err := range renewAndRelease(t, newClient(t, opts, s.URL)) {
			noToken(t, what, err)
			transportError(t, what, err)
		}
	})

	t.Run("no server", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		for what, err := range renewAndRelease(t, newClient(t, opts, "http://"+addr)) {
			noToken(t, what, err)
			transportError(t, what, err)
			if !notSent(err) {
				t.Fatalf("%s: the redacted cause no longer shows a dial error: %v", what, err)
			}
		}
	})

	t.Run("a real server refusing a token", func(t *testing.T) {
		s := startServer(t, "", "")
		c := newClient(t, Options{}, s.URL)
		info := must(c.LeaseWorker(bg, uniqueName("redact"), time.Minute, 0))(t)
		edited := info.Token[:len(info.Token)-4] + "AAAA"
		if edited == info.Token {
			edited = info.Token[:len(info.Token)-4] + "BBBB"
		}
		_, renew := c.RenewWorker(bg, info.Group, edited, 0)
		_, release := c.ReleaseWorker(bg, info.Group, edited)
		for what, err := range map[string]error{"renew": renew, "release": release} {
			if err == nil {
				t.Fatalf("%s: an edited token was taken", what)
			}
			for e := err; e != nil; e = errors.Unwrap(e) {
				for _, tok := range []string{info.Token, edited} {
					if strings.Contains(e.Error(), tok) || strings.Contains(fmt.Sprintf("%+v", e), tok) {
						t.Fatalf("%s: the error (%T) says the lease token: %v", what, e, e)
					}
				}
			}
		}
	})
}

// transportError: err is an ErrUnavailable whose cause is a *url.Error of
// the redacted path.
func transportError(t *testing.T, what string, err error) {
	t.Helper()
	var ue *url.Error
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ue) {
		t.Fatalf("%s: want an ErrUnavailable with a *url.Error behind it, got %#v", what, err)
	}
	if !strings.Contains(ue.URL, "/v1/workers/g%2F1/lease/"+what) {
		t.Fatalf("%s: the *url.Error's URL is not the redacted one: %s", what, ue.URL)
	}
}

func TestURLsWithAPasswordAreNeverSaidBack(t *testing.T) {
	const password = "s3cretPassw0rd"
	for _, u := range []string{
		"http://user:" + password + "@127.0.0.1:7878",
		"ftp://user:" + password + "@127.0.0.1:21",
		"http://user:" + password + " x@127.0.0.1:7878",
		"user:" + password + "@127.0.0.1:7878",
	} {
		_, err := New([]string{u}, Options{})
		if err == nil || !strings.Contains(err.Error(), "urls[0]") {
			t.Fatalf("%s: want an error naming urls[0], got %v", u, err)
		}
		if strings.Contains(err.Error(), password) {
			t.Fatalf("the error says the password: %v", err)
		}
	}
	if _, err := New([]string{"ftp://127.0.0.1:21"}, Options{}); err == nil || !strings.Contains(err.Error(), "ftp://127.0.0.1:21") {
		t.Fatalf("a URL without an @ is said back (what to fix), got %v", err)
	}
}

// The deprecated path forms (a token in the path) are redacted; the body
// forms the client sends have no token in the path and pass unchanged.
func TestRedactKeepsTheBodyFormPaths(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/workers/g/lease/" + secretToken + "/renew":   "/v1/workers/g/lease/***/renew",
		"/v1/workers/g/lease/" + secretToken + "/release": "/v1/workers/g/lease/***/release",
		"/v1/workers/g/lease/renew":                       "/v1/workers/g/lease/renew",
		"/v1/workers/g/lease/release":                     "/v1/workers/g/lease/release",
	} {
		if got := redact(in); got != want {
			t.Fatalf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// A 421 from a server reached over https never sends the token to an http
// leader: the client does not follow such a redirect.
func TestLeaderOfRefusesADowngrade(t *testing.T) {
	for _, c := range []struct{ h, base, want string }{
		{"http://a:1/", "http://b:2", "http://a:1"},
		{"https://a:1", "https://b:2", "https://a:1"},
		{"http://a:1", "https://b:2", ""},
		{"ftp://a", "http://b:2", ""},
		{"", "http://b:2", ""},
	} {
		if got := leaderOf(c.h, c.base); got != c.want {
			t.Fatalf("leaderOf(%q, %q) = %q, want %q", c.h, c.base, got, c.want)
		}
	}
}
