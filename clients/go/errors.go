package keysmith

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors, for errors.Is: every error a call returns because a
// server answered an error (or none answered) is an *Error whose Is matches
// the sentinel of its kind (and of its parent kind: ErrExhausted is also
// ErrConflict, ErrTooLarge is also ErrBadRequest).
var (
	// ErrBadRequest: 400, the request was malformed (bad name, bad count, a backward Alter...).
	ErrBadRequest = errors.New("keysmith: bad request")
	// ErrTooLarge: 413, the body or the count is over the server's limit.
	ErrTooLarge = errors.New("keysmith: too large")
	// ErrUnauthorized: 401, no token or the wrong one.
	ErrUnauthorized = errors.New("keysmith: unauthorized")
	// ErrForbidden: 403, the token is known but lacks the grant the call needs; never retried.
	ErrForbidden = errors.New("keysmith: forbidden")
	// ErrRateLimited: 429, too many requests (or failed authentications) from this
	// address; retried after Retry-After only when that fits in the call's
	// deadline, else answered at once with Error.RetryAfter set.
	ErrRateLimited = errors.New("keysmith: rate limited")
	// ErrGone: 410, the lease, ticket or handle belongs to an earlier life of
	// the name (it was dropped); nothing was written: take a new one.
	ErrGone = errors.New("keysmith: gone")
	// ErrSetup: the client's own settings are refused (a server certificate
	// the CA file does not vouch for, a client certificate the server
	// refuses, an https server called over http...): failed at once, never
	// retried, since no retry can help.
	ErrSetup = errors.New("keysmith: setup error")
	// ErrNotFound: 404, no sequence, pool or route of that name.
	ErrNotFound = errors.New("keysmith: not found")
	// ErrConflict: 409, the request conflicts with what the store holds.
	ErrConflict = errors.New("keysmith: conflict")
	// ErrAlreadyExists: 409, a sequence or pool of that name exists already.
	ErrAlreadyExists = errors.New("keysmith: already exists")
	// ErrExhausted: 409, no value left below the sequence's maximum.
	ErrExhausted = errors.New("keysmith: exhausted")
	// ErrTicketRefused: 409, the ticket no longer holds its number; nothing changed.
	ErrTicketRefused = errors.New("keysmith: ticket refused")
	// ErrWrongKind: 409, the call does not fit the sequence's kind.
	ErrWrongKind = errors.New("keysmith: wrong kind")
	// ErrUnavailable: 503 from every server, or none reachable, until the call's deadline.
	ErrUnavailable = errors.New("keysmith: unavailable")
	// ErrNotImplemented: 501, the server cannot do this as configured.
	ErrNotImplemented = errors.New("keysmith: not implemented by the server")
	// ErrServer: 500 or a status the client does not know.
	ErrServer = errors.New("keysmith: server error")
	// ErrClosed: the Sequence, WorkerLease or Client was closed.
	ErrClosed = errors.New("keysmith: closed")
	// ErrLeaseLost: the worker lease was lost (a renewal refused, or none in time):
	// its worker id must make no more ids.
	ErrLeaseLost = errors.New("keysmith: worker lease lost")
)

// Error is what a call returns when a server answered an error, or no server
// answered before the deadline. Status is the HTTP status (0 when no server
// answered), Code the server's stable error code ("not_found", "exhausted",
// ...), Similar the existing names that look like an unknown one (404s), URL
// the server that answered. It never holds a token: neither the client's
// (sent only in a header) nor a worker lease's (a path segment, said as
// /v1/workers/GROUP/lease/***/renew in messages and in the transport error
// that Unwrap answers).
type Error struct {
	Status  int
	Code    string
	Message string
	Similar []string
	URL     string
	// RetryAfter is the wait a 429 or 503 asked for (0 when it said none).
	RetryAfter time.Duration
	kind       error
	cause      error
}

// Error says the status, the code, the message and similar names; never a token.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d %s: ", e.Status, e.Code)
	}
	b.WriteString(e.Message)
	if len(e.Similar) > 0 {
		fmt.Fprintf(&b, " (similar: %s)", strings.Join(e.Similar, ", "))
	}
	return b.String()
}

// Is matches the sentinel of the error's kind and of its parent kind.
func (e *Error) Is(target error) bool {
	if target == e.kind {
		return true
	}
	switch e.kind {
	case ErrAlreadyExists, ErrExhausted, ErrTicketRefused, ErrWrongKind:
		return target == ErrConflict
	case ErrTooLarge:
		return target == ErrBadRequest
	}
	return false
}

// Unwrap answers the transport error behind an ErrUnavailable, if any (a
// *url.Error's URL has a worker lease's token redacted), or the decoding
// error of a "bad_response".
func (e *Error) Unwrap() error { return e.cause }

var byCode = map[string]error{
	"bad_request":      ErrBadRequest,
	"invalid_name":     ErrBadRequest,
	"invalid_argument": ErrBadRequest,
	"too_large":        ErrTooLarge,
	"unauthorized":     ErrUnauthorized,
	"forbidden":        ErrForbidden,
	"rate_limited":     ErrRateLimited,
	"dropped":          ErrGone,
	"not_found":        ErrNotFound,
	"no_route":         ErrNotFound,
	"already_exists":   ErrAlreadyExists,
	"exhausted":        ErrExhausted,
	"ticket_refused":   ErrTicketRefused,
	"wrong_kind":       ErrWrongKind,
	"ids_unavailable":  ErrUnavailable,
	"contention":       ErrUnavailable,
	"unavailable":      ErrUnavailable,
	"timeout":          ErrUnavailable,
	"closed":           ErrUnavailable,
	"no_counter":       ErrUnavailable,
	"no_secret":        ErrNotImplemented,
}

var byStatus = map[int]error{
	400: ErrBadRequest,
	401: ErrUnauthorized,
	403: ErrForbidden,
	410: ErrGone,
	429: ErrRateLimited,
	404: ErrNotFound,
	409: ErrConflict,
	413: ErrTooLarge,
	501: ErrNotImplemented,
	503: ErrUnavailable,
}

// errorFromResponse builds the error of a response from its
// {"error": {"code", "message", "similar"}} body, else from its status.
func errorFromResponse(status int, body []byte, url string) *Error {
	e := &Error{Status: status, Message: fmt.Sprintf("HTTP %d", status), URL: url}
	var parsed struct {
		Error *struct {
			Code    string   `json:"code"`
			Message string   `json:"message"`
			Similar []string `json:"similar"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &parsed) == nil && parsed.Error != nil {
		e.Code = parsed.Error.Code
		if parsed.Error.Message != "" {
			// a server (or a proxy) that names the path it was sent names the token too
			e.Message = redact(parsed.Error.Message)
		}
		e.Similar = parsed.Error.Similar
	}
	if k, ok := byCode[e.Code]; ok {
		e.kind = k
	} else if k, ok := byStatus[status]; ok {
		e.kind = k
	} else {
		e.kind = ErrServer
	}
	return e
}

func unavailable(msg, url string, cause error) *Error {
	return &Error{Message: msg, URL: url, kind: ErrUnavailable, cause: cause}
}
