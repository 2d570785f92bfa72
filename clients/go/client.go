// Package keysmith is the Go client of the keysmith key service.
//
// A Client talks to one keysmith server or to several over one store, failing
// over between them on connection errors and 503s. A Sequence hands out
// values from blocks leased from the server, prefetching the next block in
// the background. A WorkerLease holds a worker id of a group for other id
// generators (and makes time-ordered ids with it). Every call takes a
// context.Context; every type is safe for use by many goroutines.
//
// Standard library only; Go 1.19 or later.
package keysmith

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// DefaultTimeout bounds one HTTP request (above the server's own 10 s request timeout).
	DefaultTimeout = 15 * time.Second
	// DefaultDeadline bounds one call: failing over and waiting for Retry-After.
	DefaultDeadline = 30 * time.Second

	minBackoff    = 50 * time.Millisecond
	maxBackoff    = 2 * time.Second
	maxRetryAfter = 30 * time.Second
)

// Options configure a Client. The zero value is a client without token and
// TLS settings, with DefaultTimeout and DefaultDeadline.
type Options struct {
	// Token is sent as "Authorization: Bearer TOKEN" (never in a URL). One
	// trailing newline ("\n" or "\r\n", as a file or `export X=$(cat f)`
	// leaves it) is dropped; any other character outside printable ASCII
	// makes New fail (the error never shows the token). os.Getenv
	// ("KEYSMITH_TOKEN") may be given as it is.
	Token string
	// TokenFile is a file holding the token (instead of Token; not both),
	// read once by New, its trailing newline dropped.
	TokenFile string
	// CAFile is the PEM file of the CA that signed the servers' certificates
	// (https:// URLs); empty: the system's CAs.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM) for a
	// server that requires one (keysmith serve --client-ca). CertFile may
	// hold the key too (KeyFile empty).
	CertFile string
	KeyFile  string
	// Timeout bounds one HTTP request (default DefaultTimeout).
	Timeout time.Duration
	// Deadline bounds one call across failovers (default DefaultDeadline).
	Deadline time.Duration
	// HTTPClient, when set, sends the requests instead of a client made from
	// the TLS options and Timeout (which are then not used).
	HTTPClient *http.Client
}

// Client is a client of one keysmith service, or of several servers over one
// store. Every call goes to the server that answered last and fails over to
// the next one on connection errors and 503s, honouring Retry-After, until
// the call's deadline (Options.Deadline) or its context ends. Safe for
// concurrent use.
type Client struct {
	servers  *servers
	http     *http.Client
	auth     string
	deadline time.Duration

	mu        sync.Mutex
	sequences map[*Sequence]struct{}
	leases    map[*WorkerLease]struct{}
}

// New makes a Client of the servers at urls ("http://127.0.0.1:7878", or
// https:// ones). It fails, changing nothing, for no URL, a URL that is not
// http(s), a KeyFile without a CertFile, or a TLS file that cannot be read
// (the error names the option).
func New(urls []string, o Options) (*Client, error) {
	if len(urls) == 0 {
		return nil, errors.New("keysmith: urls is empty: give at least one server URL")
	}
	clean := make([]string, len(urls))
	for i, u := range urls {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			if strings.Contains(u, "@") {
				// it may hold a password: not said back
				return nil, fmt.Errorf("keysmith: urls[%d] is not an http:// or https:// URL with a host (not shown: it holds an @)", i)
			}
			return nil, fmt.Errorf("keysmith: urls[%d] = %q is not an http:// or https:// URL with a host", i, u)
		}
		if p.User != nil {
			return nil, fmt.Errorf("keysmith: urls[%d] holds a user or password: give the token in Options.Token instead", i)
		}
		clean[i] = strings.TrimRight(u, "/")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Deadline == 0 {
		o.Deadline = DefaultDeadline
	}
	if o.Timeout < 0 || o.Deadline < 0 {
		return nil, errors.New("keysmith: Options.Timeout and Options.Deadline must not be negative")
	}
	hc := o.HTTPClient
	if hc == nil {
		tc, err := tlsConfig(o)
		if err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		tr.MaxIdleConnsPerHost = 64
		hc = &http.Client{Transport: tr, Timeout: o.Timeout}
	}
	c := &Client{
		servers:   newServers(clean),
		http:      hc,
		deadline:  o.Deadline,
		sequences: map[*Sequence]struct{}{},
		leases:    map[*WorkerLease]struct{}{},
	}
	token, err := clientToken(o)
	if err != nil {
		return nil, err
	}
	if token != "" {
		c.auth = "Bearer " + token
	}
	return c, nil
}

// clientToken answers the token of o (from Token or TokenFile) without its
// trailing newline, or an error that names the option and never the token.
func clientToken(o Options) (string, error) {
	token, from := o.Token, "Options.Token"
	if o.TokenFile != "" {
		if o.Token != "" {
			return "", errors.New("keysmith: give Options.Token or Options.TokenFile, not both")
		}
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return "", fmt.Errorf("keysmith: cannot read the token file Options.TokenFile=%q: %w", o.TokenFile, err)
		}
		token, from = string(b), fmt.Sprintf("the token file Options.TokenFile=%q", o.TokenFile)
		if token == "" {
			return "", fmt.Errorf("keysmith: %s is empty: put the server's token in it", from)
		}
	}
	token = strings.TrimSuffix(strings.TrimSuffix(token, "\n"), "\r")
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("keysmith: %s holds a character that cannot be in a bearer token (byte %d of %d is %s): a token is printable ASCII without spaces; check the file or variable it came from (the token is not shown)", from, i+1, len(token), describeByte(c))
		}
	}
	if o.TokenFile != "" && token == "" {
		return "", fmt.Errorf("keysmith: %s holds only a newline: put the server's token in it", from)
	}
	return token, nil
}

// describeByte names a byte refused in a token without showing the token.
func describeByte(c byte) string {
	switch c {
	case ' ':
		return "a space"
	case '\t':
		return "a tab"
	case '\n':
		return "a newline"
	case '\r':
		return "a carriage return"
	}
	if c >= 0x80 {
		return fmt.Sprintf("the non-ASCII byte 0x%02x", c)
	}
	return fmt.Sprintf("the control byte 0x%02x", c)
}

func tlsConfig(o Options) (*tls.Config, error) {
	if o.KeyFile != "" && o.CertFile == "" {
		return nil, errors.New("keysmith: Options.KeyFile needs Options.CertFile (the client certificate the key belongs to)")
	}
	if o.CAFile == "" && o.CertFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("keysmith: cannot read the CA file Options.CAFile=%q: %w", o.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("keysmith: Options.CAFile=%q holds no PEM certificate", o.CAFile)
		}
		tc.RootCAs = pool
	}
	if o.CertFile != "" {
		key := o.KeyFile
		if key == "" {
			key = o.CertFile
		}
		cert, err := tls.LoadX509KeyPair(o.CertFile, key)
		if err != nil {
			return nil, fmt.Errorf("keysmith: cannot use the client certificate Options.CertFile=%q with Options.KeyFile=%q: %w", o.CertFile, o.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// URLs answers the client's server URLs, in the order given.
func (c *Client) URLs() []string { return append([]string(nil), c.servers.urls...) }

// Close closes every Sequence of the client (handing their unused tails back)
// and releases every WorkerLease it holds, then closes idle connections.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	seqs := make([]*Sequence, 0, len(c.sequences))
	for s := range c.sequences {
		seqs = append(seqs, s)
	}
	leases := make([]*WorkerLease, 0, len(c.leases))
	for l := range c.leases {
		leases = append(leases, l)
	}
	c.mu.Unlock()
	var first error
	for _, s := range seqs {
		if err := s.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	for _, l := range leases {
		if err := l.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	c.http.CloseIdleConnections()
	return first
}

// servers: the base URLs and, per server, when it may be tried again.
type servers struct {
	urls      []string
	mu        sync.Mutex
	preferred int
	notBefore []time.Time
	backoff   []time.Duration
}

func newServers(urls []string) *servers {
	return &servers{urls: urls, notBefore: make([]time.Time, len(urls)), backoff: make([]time.Duration, len(urls))}
}

// pick answers a ready server not yet tried in this round (i >= 0), or how
// long until one is ready (i < 0).
func (s *servers) pick(now time.Time, tried []bool) (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.urls)
	for k := 0; k < n; k++ {
		i := (s.preferred + k) % n
		if !tried[i] && !s.notBefore[i].After(now) {
			return i, 0
		}
	}
	for k := 0; k < n; k++ {
		i := (s.preferred + k) % n
		if !s.notBefore[i].After(now) {
			// every ready server failed in this round already: start a new one
			for j := range tried {
				tried[j] = false
			}
			return i, 0
		}
	}
	soonest := s.notBefore[0]
	for _, t := range s.notBefore[1:] {
		if t.Before(soonest) {
			soonest = t
		}
	}
	return -1, soonest.Sub(now)
}

func (s *servers) succeeded(i int) {
	s.mu.Lock()
	s.preferred = i
	s.backoff[i] = 0
	s.notBefore[i] = time.Time{}
	s.mu.Unlock()
}

// failed: server i is not tried again before wait (a Retry-After; 0: a
// doubling backoff).
func (s *servers) failed(i int, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wait <= 0 {
		b := s.backoff[i] * 2
		if b < minBackoff {
			b = minBackoff
		}
		if b > maxBackoff {
			b = maxBackoff
		}
		s.backoff[i] = b
		wait = b
	}
	if wait > maxRetryAfter {
		wait = maxRetryAfter
	}
	if wait < minBackoff {
		wait = minBackoff
	}
	s.notBefore[i] = time.Now().Add(wait)
	if s.preferred == i {
		s.preferred = (i + 1) % len(s.urls)
	}
}

// request is one route: what to send. safe: it may be sent again after it
// may have reached a server (a lost answer to next or reserve leaves a gap,
// never a value twice); others fail over only when surely not sent.
type request struct {
	method string
	path   string
	query  url.Values
	body   interface{}
	safe   bool
}

func seg(name string) string { return url.PathEscape(name) }

func countQuery(count int) (url.Values, error) {
	if count < 1 {
		return nil, fmt.Errorf("keysmith: count must be at least 1, got %d", count)
	}
	return url.Values{"count": {strconv.Itoa(count)}, "as": {"string"}}, nil
}

// notSent: the error shows the request never reached the server.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func retryAfter(h string) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// call sends r, failing over, until an answer or the deadline (the client's
// when deadline is 0); decodes a success into out (when not nil).
func (c *Client) call(ctx context.Context, r request, deadline time.Duration, out interface{}) error {
	if deadline <= 0 {
		deadline = c.deadline
	}
	var body []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return fmt.Errorf("keysmith: cannot encode the request body: %w", err)
		}
		body = b
	}
	// shown: the path as errors say it, without a worker lease's token
	shown := redact(r.path)
	end := time.Now().Add(deadline)
	tried := make([]bool, len(c.servers.urls))
	var last *Error
	for {
		now := time.Now()
		i, wait := c.servers.pick(now, tried)
		if i < 0 {
			if now.Add(wait).After(end) {
				if last != nil {
					return last
				}
				return unavailable(fmt.Sprintf("no keysmith server is ready before the deadline (%s)", strings.Join(c.servers.urls, ", ")), "", nil)
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			continue
		}
		if !now.Before(end) && last != nil {
			return last
		}
		tried[i] = true
		base := c.servers.urls[i]
		send := func(base string) (*http.Response, error) {
			u := base + r.path
			if len(r.query) > 0 {
				u += "?" + r.query.Encode()
			}
			var rd io.Reader
			if body != nil {
				rd = bytes.NewReader(body)
			}
			req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
			if err != nil {
				return nil, fmt.Errorf("keysmith: cannot make the request %s %s: %w", r.method, shown, redactErr(err))
			}
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			return c.http.Do(req)
		}
		resp, err := send(base)
		// A leader-ordered sequence that another server leads: the 421 names
		// the leader; the same request goes there, once, with this client's
		// token and TLS settings.
		if err == nil && resp.StatusCode == http.StatusMisdirectedRequest {
			if leader := leaderOf(resp.Header.Get("Keysmith-Leader"), base); leader != "" {
				resp.Body.Close()
				base = leader
				resp, err = send(base)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if why := setupError(err); why != "" {
				// no other server or later try can help: the client's own settings are refused
				return &Error{Message: fmt.Sprintf("%s: %s: %v", base, why, stripURL(err)), URL: base, kind: ErrSetup, cause: redactErr(err)}
			}
			c.servers.failed(i, 0)
			e := unavailable(fmt.Sprintf("%s: %v", base, stripURL(err)), base, redactErr(err))
			if !r.safe && !notSent(err) {
				e.Message += "; the request may or may not have taken effect, so it was not sent again"
				return e
			}
			last = e
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.servers.failed(i, 0)
			err = redactErr(err)
			e := unavailable(fmt.Sprintf("%s: reading the answer: %v", base, err), base, err)
			if !r.safe {
				e.Message += "; the request may or may not have taken effect, so it was not sent again"
				return e
			}
			last = e
			continue
		}
		if resp.StatusCode == http.StatusServiceUnavailable {
			c.servers.failed(i, retryAfter(resp.Header.Get("Retry-After")))
			e := errorFromResponse(resp.StatusCode, data, base)
			if !r.safe && e.Code == "timeout" {
				e.Message += "; the request may still take effect, so it was not sent again"
				return e
			}
			last = e
			continue
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			// refused before any handler ran: sending it again is safe
			e := errorFromResponse(resp.StatusCode, data, base)
			e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
			wait := e.RetryAfter
			if wait <= 0 {
				wait = minBackoff
			}
			if time.Now().Add(wait).After(end) {
				if e.RetryAfter > 0 {
					e.Message += fmt.Sprintf(" (the server asks to retry after %v, beyond this call's deadline)", e.RetryAfter)
				}
				return e
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			tried[i] = false
			continue
		}
		c.servers.succeeded(i)
		if resp.StatusCode >= 400 {
			return errorFromResponse(resp.StatusCode, data, base)
		}
		if out == nil || len(data) == 0 {
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return &Error{Status: resp.StatusCode, Code: "bad_response", URL: base, kind: ErrServer, cause: err,
				Message: fmt.Sprintf("%s %s: the answer is not what the client expects: %v", r.method, shown, err)}
		}
		return nil
	}
}

// setupError says why err shows the client's own TLS settings refused (""
// when it does not): a certificate the CA does not vouch for, a name it
// does not cover, a TLS alert from the server (its refusal of the client's
// certificate, or of none), an http server called with https or the reverse.
func setupError(err error) string {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return "the server's certificate is not signed by the CA this client trusts (Options.CAFile)"
	case errors.As(err, &invalid):
		return "the server's certificate is not valid (Options.CAFile)"
	case errors.As(err, &host):
		return "the server's certificate does not name the host of the URL"
	case errors.As(err, &record):
		return "the server does not speak TLS: use an http:// URL for it"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "remote error: tls:"):
		return "the server refused the TLS handshake (a client certificate it does not accept, or none: Options.CertFile)"
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return "the server does not speak TLS: use an http:// URL for it"
	case strings.Contains(msg, "malformed HTTP response") && strings.Contains(msg, "\\x15\\x03"):
		return "the server speaks TLS: use an https:// URL for it"
	}
	return ""
}

// leaderOf answers the leader's address a 421 not_leader names (its
// Keysmith-Leader header), or "" when it names none, and "" for an http
// leader of a request that went to base over https: the token is never
// sent in clear text (the 421 reaches the caller as an error).
func leaderOf(h, base string) string {
	if !strings.HasPrefix(h, "http://") && !strings.HasPrefix(h, "https://") {
		return ""
	}
	if strings.HasPrefix(base, "https://") && !strings.HasPrefix(h, "https://") {
		return ""
	}
	return strings.TrimRight(h, "/")
}

// leaseToken: the token segment of the deprecated path forms of a worker
// lease's renewal and release (/v1/workers/GROUP/lease/TOKEN/renew and
// /release). The client sends the token in the body; a server's message
// that quotes an old-form path is still redacted.
var leaseToken = regexp.MustCompile(`(/v1/workers/[^/?#\s]*/lease/)[^/?#\s]+(/(?:renew|release))`)

// redact answers s (a path, a URL or a message) with every worker lease
// token in it replaced by "***": /v1/workers/GROUP/lease/***/renew.
func redact(s string) string { return leaseToken.ReplaceAllString(s, "${1}***${2}") }

// redactErr answers err with its URL redacted when it is a *url.Error (what
// http.Client.Do and url.Parse answer, with the request's whole URL): a
// *url.Error still, with the same Op and Err, for errors.As and the callers
// that look at the transport error behind an ErrUnavailable.
func redactErr(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return &url.Error{Op: ue.Op, URL: redact(ue.URL), Err: ue.Err}
	}
	return err
}

// stripURL keeps a *url.Error's cause: the server URL is said once, in front
// (and the path may hold a worker lease's token).
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
