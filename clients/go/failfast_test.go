package keysmith

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// secrets collects every error a test produced, and the secrets none may say.
type secrets struct {
	words []string
	errs  map[string]error
}

func (s *secrets) keep(what string, err error) error {
	if s.errs == nil {
		s.errs = map[string]error{}
	}
	s.errs[what] = err
	return err
}

// check: every error (its whole Unwrap chain, %v and %+v and %#v of each
// *Error) says none of the secrets.
func (s *secrets) check(t *testing.T) {
	t.Helper()
	if len(s.errs) == 0 {
		t.Fatal("no error was kept")
	}
	for what, err := range s.errs {
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			texts := []string{e.Error(), fmt.Sprintf("%v", e), fmt.Sprintf("%+v", e)}
			if ke, ok := e.(*Error); ok {
				texts = append(texts, fmt.Sprintf("%#v", *ke), ke.URL, ke.Message)
			}
			for _, text := range texts {
				for _, w := range s.words {
					if w != "" && strings.Contains(text, w) {
						t.Fatalf("%s: an error (%T) says a secret: %s", what, e, text)
					}
				}
			}
		}
	}
}

func digest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// A server with an access file: an admin and a team principal with use and
// read on "team/*" only, at 1 request a second. Every way a call fails
// gives its typed error at once, and no error says a token.
func TestFailFastTypedErrorsAndNoSecret(t *testing.T) {
	dir := t.TempDir()
	admin, team := "adm-"+strings.Repeat("A1b2", 10), "team-"+strings.Repeat("Z9y8", 10)
	access := filepath.Join(dir, "access.toml")
	audit := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(access, []byte(fmt.Sprintf(`
[[principal]]
name = "admin"
token_sha256 = %q
grants = [ { names = "*", actions = ["use", "read", "admin"] } ]

[[principal]]
name = "team"
token_sha256 = %q
grants = [ { names = "team/*", actions = ["use", "read"] } ]
rate = 1
burst = 1
`, digest(admin), digest(team))), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "", "", "--access-file", access, "--audit-log", audit, "--auth-failures-per-ip", "0")
	sec := &secrets{words: []string{admin, team}}

	// a token file ending in a newline: the newline is dropped
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Options{TokenFile: tokenFile, Deadline: time.Hour}, srv.URL)
	name := uniqueName("team")
	must(c.CreateSequence(bg, name, SequenceOptions{}))(t)
	// as $KEYSMITH_TOKEN from `export KEYSMITH_TOKEN=$(cat file)` on Windows line ends
	cr := newClient(t, Options{Token: admin + "\r\n", Deadline: time.Hour}, srv.URL)
	if vs := must(cr.Next(bg, name, 1))(t); vs[0] != 1 {
		t.Fatalf("first value %v", vs)
	}

	// other characters are refused at construction, naming the option, never the token
	for _, bad := range []string{admin[:10] + "\n" + admin[10:], admin + " ", "é" + admin, admin + "\n\n"} {
		_, err := New([]string{srv.URL}, Options{Token: bad})
		if err == nil || !strings.Contains(err.Error(), "Options.Token") {
			t.Fatalf("a token with %q: %v, want an error naming Options.Token", bad[len(bad)-1:], err)
		}
		sec.keep(fmt.Sprintf("bad token %q", bad), err)
	}
	for what, o := range map[string]Options{
		"a missing token file": {TokenFile: filepath.Join(dir, "missing.token")},
		"Token and TokenFile":  {Token: admin, TokenFile: tokenFile},
	} {
		_, err := New([]string{srv.URL}, o)
		if err == nil || !strings.Contains(err.Error(), "Options.Token") {
			t.Fatalf("%s: %v, want an error naming the option", what, err)
		}
		sec.keep(what, err)
	}

	// every failure below is answered at once: the deadline of an hour would hang the test
	var ke *Error
	wrong := newClient(t, Options{Token: "not-" + team, Deadline: time.Hour}, srv.URL)
	err := sec.keep("401", func() error { _, err := wrong.Next(bg, name, 1); return err }())
	if !errors.Is(err, ErrUnauthorized) || !errors.As(err, &ke) || ke.Status != 401 {
		t.Fatalf("a wrong token: %v, want ErrUnauthorized", err)
	}
	tc := newClient(t, Options{Token: team, Deadline: time.Hour}, srv.URL)
	err = sec.keep("403", func() error { _, err := tc.CreateSequence(bg, uniqueName("other"), SequenceOptions{}); return err }())
	if !errors.Is(err, ErrForbidden) || !errors.As(err, &ke) || ke.Status != 403 {
		t.Fatalf("no admin grant: %v, want ErrForbidden", err)
	}
	err = sec.keep("404", func() error { _, err := c.GetSequence(bg, uniqueName("team")); return err }())
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown name: %v, want ErrNotFound", err)
	}
	err = sec.keep("409", func() error { _, err := c.CreateSequence(bg, name, SequenceOptions{}); return err }())
	if !errors.Is(err, ErrAlreadyExists) || !errors.Is(err, ErrConflict) {
		t.Fatalf("a second create: %v, want ErrAlreadyExists", err)
	}
	// a lease of an earlier life of the name: 410
	lease := must(c.Reserve(bg, name, 5))(t)
	sec.words = append(sec.words, lease.Token)
	if err := c.DropSequence(bg, name); err != nil {
		t.Fatal(err)
	}
	must(c.CreateSequence(bg, name, SequenceOptions{}))(t)
	err = sec.keep("410", func() error { _, err := c.Release(bg, lease, lease.Ranges[0].Start); return err }())
	if !errors.Is(err, ErrGone) || !errors.As(err, &ke) || ke.Status != 410 {
		t.Fatalf("releasing a lease of a dropped life: %v, want ErrGone", err)
	}
	// a worker lease's token, edited: refused
	wl := must(c.LeaseWorker(bg, uniqueName("team"), time.Minute, 0))(t)
	edited := wl.Token[:len(wl.Token)-4] + "AAAA"
	if edited == wl.Token {
		edited = wl.Token[:len(wl.Token)-4] + "BBBB"
	}
	sec.words = append(sec.words, wl.Token, edited)
	err = sec.keep("renew with an edited worker lease token", func() error { _, err := c.RenewWorker(bg, wl.Group, edited, 0); return err }())
	if err == nil {
		t.Fatal("an edited worker lease token was taken")
	}

	// printing a lease or a worker lease never shows its token
	for _, text := range []string{fmt.Sprintf("%v %+v %#v", lease, lease, lease), fmt.Sprintf("%v %+v %#v", wl, wl, wl)} {
		if strings.Contains(text, lease.Token) || strings.Contains(text, wl.Token) || !strings.Contains(text, "***") {
			t.Fatalf("a printed lease shows its token: %s", text)
		}
	}

	// 429 within the deadline: waited for and sent again. The team's rate is
	// 1/s: calls until the audit trail shows a 429, each of them answered.
	for i := 0; ; i++ {
		if _, err := tc.Next(bg, name, 1); err != nil {
			t.Fatalf("call %d over the rate: %v, want it retried after Retry-After", i, err)
		}
		if b, _ := os.ReadFile(audit); strings.Contains(string(b), `"status":429`) {
			break
		}
		if i == 100 {
			t.Fatal("100 calls at 1 request a second and no 429 in the audit trail")
		}
	}
	// 429 beyond the deadline: at once, with the wait it asked for
	short := newClient(t, Options{Token: team, Deadline: time.Millisecond}, srv.URL)
	var limited error
	for i := 0; limited == nil && i < 100; i++ {
		_, limited = short.Next(bg, name, 1)
	}
	sec.keep("429", limited)
	if !errors.Is(limited, ErrRateLimited) || !errors.As(limited, &ke) || ke.Status != 429 || ke.RetryAfter <= 0 {
		t.Fatalf("over the rate with a short deadline: %v, want ErrRateLimited with RetryAfter", limited)
	}

	// 503 and no server: ErrUnavailable after the deadline
	srv.stop()
	gone := newClient(t, Options{Token: admin, Deadline: 200 * time.Millisecond}, srv.URL)
	err = sec.keep("no server", func() error { _, err := gone.Next(bg, name, 1); return err }())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no server: %v, want ErrUnavailable", err)
	}

	// TLS: a CA that did not sign the server, a server that wants a client
	// certificate, https to an http server: ErrSetup at once
	cs := makeCerts(t)
	tlsArgs := []string{"--tls-cert", cs.path("server.pem"), "--tls-key", cs.path("server-key.pem")}
	https := startServer(t, "", admin, tlsArgs...)
	mtls := startServer(t, "", admin, append(tlsArgs, "--client-ca", cs.path("ca.pem"))...)
	plain := startServer(t, "", admin)
	for what, cl := range map[string]*Client{
		"an untrusted server certificate": newClient(t, Options{Token: admin, CAFile: cs.path("other-ca.pem"), Deadline: time.Hour}, https.URL),
		"no client certificate":           newClient(t, Options{Token: admin, CAFile: cs.path("ca.pem"), Deadline: time.Hour}, mtls.URL),
		"https to an http server":         newClient(t, Options{Token: admin, Deadline: time.Hour}, strings.Replace(plain.URL, "http://", "https://", 1)),
	} {
		_, err := cl.CreateSequence(bg, uniqueName("tls"), SequenceOptions{})
		sec.keep(what, err)
		if what == "no client certificate" && errors.Is(err, ErrUnavailable) && strings.Contains(err.Error(), "not sent again") {
			// TLS 1.3: the server refuses a missing certificate after the client's side of
			// the handshake ended; when it closed before its alert was read the connection
			// broke, and an unsafe call (a create) is not sent again either
			continue
		}
		if !errors.Is(err, ErrSetup) {
			t.Fatalf("%s: %v, want ErrSetup", what, err)
		}
	}
	sec.check(t)
}
