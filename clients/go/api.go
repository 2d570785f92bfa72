package keysmith

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Numbering tells how a numbered sequence hands out its numbers.
type Numbering struct {
	// Gapless: numbers are taken with tickets (TakeTicket).
	Gapless bool `json:"gapless"`
	// Period: "day", "month" or "year" (numbers restart every period), or "".
	Period string `json:"period"`
	// Template: how numbers are printed, e.g. "INV-{period}-{n:04}", or "".
	Template string `json:"template"`
}

// SequenceInfo is a sequence as the server shows it. Pointers are nil when
// the server did not send the field (Unaccounted and RunwaySeconds come only
// from GetSequence; Increment and Offset only for a residue class).
type SequenceInfo struct {
	Name          string
	Next          int64
	Start         int64
	Max           int64
	Block         int64
	Version       *int64
	Remaining     *int64
	Unaccounted   *int64
	RunwaySeconds *float64
	Increment     *int64
	Offset        *int64
	Numbering     *Numbering
	// Raw is the server's JSON, for fields this client does not know.
	Raw json.RawMessage
}

type wireSequence struct {
	Name          string     `json:"name"`
	Next          jint       `json:"next"`
	Start         jint       `json:"start"`
	Max           jint       `json:"max"`
	Block         jint       `json:"block"`
	Version       optInt     `json:"version"`
	Remaining     optInt     `json:"remaining"`
	Unaccounted   optInt     `json:"unaccounted"`
	RunwaySeconds *float64   `json:"runway_seconds"`
	Increment     optInt     `json:"increment"`
	Offset        optInt     `json:"offset"`
	Numbering     *Numbering `json:"numbering"`
}

// UnmarshalJSON reads the server's JSON of a sequence.
func (s *SequenceInfo) UnmarshalJSON(b []byte) error {
	var w wireSequence
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = SequenceInfo{w.Name, int64(w.Next), int64(w.Start), int64(w.Max), int64(w.Block), w.Version.ptr(),
		w.Remaining.ptr(), w.Unaccounted.ptr(), w.RunwaySeconds, w.Increment.ptr(), w.Offset.ptr(), w.Numbering,
		append(json.RawMessage(nil), b...)}
	return nil
}

// SequenceOptions are the optional settings of CreateSequence; zero values
// leave the server's defaults.
type SequenceOptions struct {
	Start, Max, Block *int64
	// Gapless: gap-free numbers taken with tickets.
	Gapless bool
	// Period: "day", "month" or "year": numbers restart every period.
	Period string
	// Format: how numbers are printed, e.g. "INV-{period}-{n:04}".
	Format string
	// Increment (2 to 1000000) and Offset (0 to Increment-1): a residue
	// class, every value is Offset modulo Increment.
	Increment, Offset *int64
	// Opaque: values are a keyed permutation of a plain counter (1 to Max;
	// the key stays on the server). Decode maps a value back.
	Opaque bool
	// Encoding: "base32" or "base62": values are fixed-width strings that
	// sort as the numbers, read with NextNumbers; Prefix ("ord" gives
	// ord_...) goes with it.
	Encoding, Prefix string
	// JSSafe: max 2^53-1, the largest integer JavaScript holds exactly.
	JSSafe bool
	// Order: "leader" for one leased leader that hands values out in
	// arrival order (take them with Next, which follows a follower's 421 to
	// the leader); "" or "cached": the default.
	Order string
}

// Int64 answers a pointer to v, for the optional fields of the options.
func Int64(v int64) *int64 { return &v }

// CreateSequence creates a sequence. ErrAlreadyExists when the name is taken,
// ErrBadRequest for a bad name or option (nothing is created then).
func (c *Client) CreateSequence(ctx context.Context, name string, o SequenceOptions) (SequenceInfo, error) {
	body := map[string]interface{}{"name": name}
	put := func(k string, v *int64) {
		if v != nil {
			body[k] = *v
		}
	}
	put("start", o.Start)
	put("max", o.Max)
	put("block", o.Block)
	put("increment", o.Increment)
	put("offset", o.Offset)
	if o.Gapless {
		body["gapless"] = true
	}
	if o.Order != "" {
		body["order"] = o.Order
	}
	if o.Period != "" {
		body["period"] = o.Period
	}
	if o.Format != "" {
		body["format"] = o.Format
	}
	if o.Opaque {
		body["opaque"] = true
	}
	if o.JSSafe {
		body["js_safe"] = true
	}
	if o.Encoding != "" {
		body["encoding"] = o.Encoding
	}
	if o.Prefix != "" {
		body["prefix"] = o.Prefix
	}
	var out SequenceInfo
	err := c.call(ctx, request{method: "POST", path: "/v1/sequences", body: body}, 0, &out)
	return out, err
}

// AlterOptions: Next moves a sequence forward (never back), Max raises its
// maximum, Block changes its block size for handles opened from now on.
type AlterOptions struct {
	Next, Max, Block *int64
}

// Alter changes a sequence safely while it is in use. A change it does not
// allow is ErrBadRequest and changes nothing; a numbered sequence is ErrWrongKind.
func (c *Client) Alter(ctx context.Context, name string, o AlterOptions) (SequenceInfo, error) {
	body := map[string]interface{}{}
	for k, v := range map[string]*int64{"next": o.Next, "max": o.Max, "block": o.Block} {
		if v != nil {
			body[k] = *v
		}
	}
	var out SequenceInfo
	// not sent again: a second `next` may be refused once values were reserved in between
	err := c.call(ctx, request{method: "PATCH", path: "/v1/sequences/" + seg(name), body: body}, 0, &out)
	return out, err
}

// GetSequence answers the sequence name; ErrNotFound when there is none.
func (c *Client) GetSequence(ctx context.Context, name string) (SequenceInfo, error) {
	var out SequenceInfo
	err := c.call(ctx, request{method: "GET", path: "/v1/sequences/" + seg(name), safe: true}, 0, &out)
	return out, err
}

// ListSequences answers every sequence.
func (c *Client) ListSequences(ctx context.Context) ([]SequenceInfo, error) {
	var out struct {
		Sequences []SequenceInfo `json:"sequences"`
	}
	err := c.call(ctx, request{method: "GET", path: "/v1/sequences", safe: true}, 0, &out)
	return out.Sequences, err
}

// DropSequence deletes the sequence name; ErrNotFound when there is none.
func (c *Client) DropSequence(ctx context.Context, name string) error {
	return c.call(ctx, request{method: "DELETE", path: "/v1/sequences/" + seg(name)}, 0, nil)
}

// Next answers count values of the sequence from the server's own cache (one
// request; no local block: use Client.Sequence for that). ErrExhausted when
// the sequence has fewer left; ErrWrongKind for a numbered sequence.
func (c *Client) Next(ctx context.Context, name string, count int) ([]int64, error) {
	q, err := countQuery(count)
	if err != nil {
		return nil, err
	}
	var out struct {
		Values []json.RawMessage `json:"values"`
	}
	if err := c.call(ctx, request{method: "POST", path: "/v1/sequences/" + seg(name) + "/next", query: q, safe: true}, 0, &out); err != nil {
		return nil, err
	}
	vs := make([]int64, len(out.Values))
	for i, raw := range out.Values {
		var j jint
		if j.UnmarshalJSON(raw) != nil {
			return nil, &Error{Status: 200, Code: "wrong_kind", kind: ErrWrongKind, Message: fmt.Sprintf(
				"sequence %q answered printed numbers (%s...), not integers: it is periodic or formatted; read them with NextNumbers (these were taken)", name, raw)}
		}
		vs[i] = int64(j)
	}
	return vs, nil
}

// NextNumbers answers count numbers as text: a periodic or formatted
// sequence's printed numbers, an ordinary one's values in decimal.
func (c *Client) NextNumbers(ctx context.Context, name string, count int) ([]Number, error) {
	q, err := countQuery(count)
	if err != nil {
		return nil, err
	}
	var out struct {
		Values []Number `json:"values"`
	}
	err = c.call(ctx, request{method: "POST", path: "/v1/sequences/" + seg(name) + "/next", query: q, safe: true}, 0, &out)
	return out.Values, err
}

// Range is the values Start, Start+Step, ... strictly below End (Step is 1
// but in a residue class).
type Range struct {
	Start, End, Step int64
}

// Len answers how many values the range holds.
func (r Range) Len() int64 {
	if r.End <= r.Start {
		return 0
	}
	return (r.End - r.Start + r.Step - 1) / r.Step
}

// Lease is values reserved durably for this caller only (Reserve).
type Lease struct {
	Sequence string
	Ranges   []Range
	// Token names the lease to Release.
	Token string
	Step  int64
}

// Len answers how many values the lease holds.
func (l Lease) Len() int64 {
	var n int64
	for _, r := range l.Ranges {
		n += r.Len()
	}
	return n
}

// Values answers the lease's values in order.
func (l Lease) Values() []int64 {
	out := make([]int64, 0, l.Len())
	for _, r := range l.Ranges {
		for v := r.Start; v < r.End; v += r.Step {
			out = append(out, v)
		}
	}
	return out
}

type wireRange struct {
	Start jint `json:"start"`
	End   jint `json:"end"`
}

// Reserve reserves count values of the sequence durably for this caller
// only. ErrExhausted when fewer are left below its maximum.
func (c *Client) Reserve(ctx context.Context, name string, count int) (Lease, error) {
	q, err := countQuery(count)
	if err != nil {
		return Lease{}, err
	}
	var out struct {
		Ranges []wireRange `json:"ranges"`
		Lease  string      `json:"lease"`
		Step   optInt      `json:"step"`
	}
	if err := c.call(ctx, request{method: "POST", path: "/v1/sequences/" + seg(name) + "/reserve", query: q, safe: true}, 0, &out); err != nil {
		return Lease{}, err
	}
	step := int64(1)
	if out.Step.set {
		step = out.Step.v
	}
	if step < 1 {
		return Lease{}, &Error{Status: 200, Code: "bad_response", kind: ErrServer, Message: fmt.Sprintf("the server sent the step %d for a lease of %q", step, name)}
	}
	l := Lease{Sequence: name, Token: out.Lease, Step: step}
	for _, r := range out.Ranges {
		l.Ranges = append(l.Ranges, Range{int64(r.Start), int64(r.End), step})
	}
	return l, nil
}

// Release hands the lease's values from `from` on back (from is one of its
// values, Start + i*Step). It answers the range that went back, or nil when
// someone reserved since (the values then stay a gap: never handed out).
func (c *Client) Release(ctx context.Context, l Lease, from int64) (*Range, error) {
	return c.release(ctx, l.Sequence, l.Token, from, l.Step, 0)
}

func (c *Client) release(ctx context.Context, name, token string, from, step int64, deadline time.Duration) (*Range, error) {
	var out struct {
		Released *wireRange `json:"released"`
	}
	body := map[string]interface{}{"lease": token, "from": from}
	if err := c.call(ctx, request{method: "POST", path: "/v1/sequences/" + seg(name) + "/release", body: body}, deadline, &out); err != nil {
		return nil, err
	}
	if out.Released == nil {
		return nil, nil
	}
	return &Range{int64(out.Released.Start), int64(out.Released.End), step}, nil
}

// Ticket is a gap-free number held for its holder: commit it or release it.
type Ticket struct {
	Sequence string
	// Value is the number (its text for a formatted sequence).
	Value Number
	// Ticket is what CommitTicket and ReleaseTicket take.
	Ticket string
	// Period is the period key (20261123), nil for a sequence without periods.
	Period *int64
	// N is the counter within the period.
	N int64
}

// TakeTicket takes the lowest free number of a gap-free sequence, held for
// ttlSeconds (1 to 86400; 0: the server's default). ErrWrongKind on an
// ordinary sequence.
func (c *Client) TakeTicket(ctx context.Context, name string, ttlSeconds int) (Ticket, error) {
	var q url.Values
	if ttlSeconds != 0 {
		q = url.Values{"ttl": {strconv.Itoa(ttlSeconds)}}
	}
	var out struct {
		Value  Number `json:"value"`
		Ticket string `json:"ticket"`
		Period optInt `json:"period"`
		N      jint   `json:"n"`
	}
	// a ticket whose answer was lost holds its number only until its ttl: no gap
	if err := c.call(ctx, request{method: "POST", path: "/v1/sequences/" + seg(name) + "/tickets", query: q, safe: true}, 0, &out); err != nil {
		return Ticket{}, err
	}
	return Ticket{name, out.Value, out.Ticket, out.Period.ptr(), int64(out.N)}, nil
}

func (c *Client) settle(ctx context.Context, name, ticket, action, key string) (Number, error) {
	var out map[string]Number
	// not sent again: a repeat would be refused (the first one settled the ticket)
	// the ticket in the body, never in the URL
	body := struct {
		Ticket string `json:"ticket"`
	}{ticket}
	err := c.call(ctx, request{method: "POST", path: "/v1/sequences/" + seg(name) + "/tickets/" + action, body: body}, 0, &out)
	return out[key], err
}

// CommitTicket makes the ticket's number final and answers it.
// ErrTicketRefused, changing nothing, when the ticket no longer holds it.
func (c *Client) CommitTicket(ctx context.Context, name, ticket string) (Number, error) {
	return c.settle(ctx, name, ticket, "commit", "committed")
}

// ReleaseTicket frees the ticket's number (the next one taken) and answers
// it. ErrTicketRefused, changing nothing, when the ticket no longer holds it.
func (c *Client) ReleaseTicket(ctx context.Context, name, ticket string) (Number, error) {
	return c.settle(ctx, name, ticket, "release", "released")
}

// NumberParts is a printed number taken apart: its period key (nil when the
// sequence has none) and its counter.
type NumberParts struct {
	Period *int64
	N      int64
}

// Parse takes a number the sequence printed apart. ErrBadRequest for text
// that is not one of its numbers.
func (c *Client) Parse(ctx context.Context, name, text string) (NumberParts, error) {
	var out struct {
		Period optInt `json:"period"`
		N      jint   `json:"n"`
	}
	err := c.call(ctx, request{method: "POST", path: "/v1/sequences/" + seg(name) + "/parse", body: map[string]string{"value": text}, safe: true}, 0, &out)
	return NumberParts{out.Period.ptr(), int64(out.N)}, err
}

// DecodedValue is a value an opaque, encoded or bit-reversed sequence handed
// out, mapped back: the value as an integer and the plain counter it was made
// from.
type DecodedValue struct {
	Value, Counter int64
}

// Decode answers the counter behind a value the sequence handed out (an
// integer in decimal, or an encoded string). ErrBadRequest, naming what is
// wrong, for a value it never hands out; it needs the use grant.
func (c *Client) Decode(ctx context.Context, name, value string) (DecodedValue, error) {
	var out struct {
		Value   jint `json:"value"`
		Counter jint `json:"counter"`
	}
	err := c.call(ctx, request{method: "POST", path: "/v1/sequences/" + seg(name) + "/decode", body: map[string]string{"value": value}, safe: true}, 0, &out)
	return DecodedValue{int64(out.Value), int64(out.Counter)}, err
}

// PoolInfo is a value pool. Lowest, Highest, Taken and MaxValue come only
// from GetPool; Increment and Offset only for a pool in a residue class.
type PoolInfo struct {
	Name      string
	Start     int64
	Size      int64
	Lowest    *int64
	Highest   *int64
	Taken     *int64
	MaxValue  *int64
	Increment *int64
	Offset    *int64
	Raw       json.RawMessage
}

// UnmarshalJSON reads the server's JSON of a pool.
func (p *PoolInfo) UnmarshalJSON(b []byte) error {
	var w struct {
		Name      string `json:"name"`
		Start     jint   `json:"start"`
		Size      jint   `json:"size"`
		Lowest    optInt `json:"lowest"`
		Highest   optInt `json:"highest"`
		Taken     optInt `json:"taken"`
		MaxValue  optInt `json:"max_value"`
		Increment optInt `json:"increment"`
		Offset    optInt `json:"offset"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = PoolInfo{w.Name, int64(w.Start), int64(w.Size), w.Lowest.ptr(), w.Highest.ptr(), w.Taken.ptr(),
		w.MaxValue.ptr(), w.Increment.ptr(), w.Offset.ptr(), append(json.RawMessage(nil), b...)}
	return nil
}

// PoolOptions are the optional settings of CreatePool.
type PoolOptions struct {
	// Start is the first number (default 1).
	Start *int64
	// Increment (2 to 1000000) and Offset (0 to Increment-1): every number
	// of the pool is Offset modulo Increment.
	Increment, Offset *int64
}

// CreatePool creates a value pool of size numbers. ErrAlreadyExists when
// the name is taken, ErrBadRequest for a bad name or option.
func (c *Client) CreatePool(ctx context.Context, name string, size int64, o PoolOptions) (PoolInfo, error) {
	body := map[string]interface{}{"name": name, "size": size}
	for k, v := range map[string]*int64{"start": o.Start, "increment": o.Increment, "offset": o.Offset} {
		if v != nil {
			body[k] = *v
		}
	}
	var out PoolInfo
	err := c.call(ctx, request{method: "POST", path: "/v1/pools", body: body}, 0, &out)
	return out, err
}

// GetPool answers the pool name; ErrNotFound when there is none.
func (c *Client) GetPool(ctx context.Context, name string) (PoolInfo, error) {
	var out PoolInfo
	err := c.call(ctx, request{method: "GET", path: "/v1/pools/" + seg(name), safe: true}, 0, &out)
	return out, err
}

// ListPools answers every pool.
func (c *Client) ListPools(ctx context.Context) ([]PoolInfo, error) {
	var out struct {
		Pools []PoolInfo `json:"pools"`
	}
	err := c.call(ctx, request{method: "GET", path: "/v1/pools", safe: true}, 0, &out)
	return out.Pools, err
}

// DropPool deletes the pool name; ErrNotFound when there is none.
func (c *Client) DropPool(ctx context.Context, name string) error {
	return c.call(ctx, request{method: "DELETE", path: "/v1/pools/" + seg(name)}, 0, nil)
}

// PoolNext takes numbers from the pool: count, or fewer when the server's
// answer is partial (it ran out of time or numbers after taking some).
// ErrExhausted when the pool has none left.
func (c *Client) PoolNext(ctx context.Context, name string, count int) ([]int64, error) {
	q, err := countQuery(count)
	if err != nil {
		return nil, err
	}
	var out struct {
		Values []jint `json:"values"`
	}
	err = c.call(ctx, request{method: "POST", path: "/v1/pools/" + seg(name) + "/next", query: q, safe: true}, 0, &out)
	return ints(out.Values), err
}

// CounterNames are "<host>/<n>" names from the server's host counter.
type CounterNames struct {
	Host        string
	First, Last int64
	Names       []string
}

// CounterNext answers count names from the server's host counter.
func (c *Client) CounterNext(ctx context.Context, count int) (CounterNames, error) {
	q, err := countQuery(count)
	if err != nil {
		return CounterNames{}, err
	}
	var out struct {
		Host  string   `json:"host"`
		First jint     `json:"first"`
		Last  jint     `json:"last"`
		Names []string `json:"names"`
	}
	err = c.call(ctx, request{method: "POST", path: "/v1/counters/next", query: q, safe: true}, 0, &out)
	return CounterNames{out.Host, int64(out.First), int64(out.Last), out.Names}, err
}

// ShardKeyView is a shard key: its signed URL-safe External string, its
// description and its JSON list, as the server sends them.
type ShardKeyView struct {
	External string          `json:"external"`
	Key      json.RawMessage `json:"key"`
	List     json.RawMessage `json:"list"`
}

// ShardKeyEncode signs a shard key. record and each child are an integer,
// its decimal string, or {"type": ..., "value": ...}. ErrNotImplemented when
// the server has no shard key secret.
func (c *Client) ShardKeyEncode(ctx context.Context, origin string, shard int64, record interface{}, children ...interface{}) (ShardKeyView, error) {
	if children == nil {
		children = []interface{}{}
	}
	body := map[string]interface{}{"origin": origin, "shard": shard, "record": record, "children": children}
	var out ShardKeyView
	err := c.call(ctx, request{method: "POST", path: "/v1/shard-keys/encode", body: body, safe: true}, 0, &out)
	return out, err
}

// ShardKeyDecode checks and takes apart an external shard key; origin,
// recordType and childTypes, when given, must match. ErrBadRequest for a
// key that is not valid.
func (c *Client) ShardKeyDecode(ctx context.Context, external, origin, recordType string, childTypes ...string) (ShardKeyView, error) {
	body := map[string]interface{}{"external": external}
	if origin != "" {
		body["origin"] = origin
	}
	if recordType != "" {
		body["record_type"] = recordType
	}
	if len(childTypes) > 0 {
		body["child_types"] = childTypes
	}
	var out ShardKeyView
	err := c.call(ctx, request{method: "POST", path: "/v1/shard-keys/decode", body: body, safe: true}, 0, &out)
	return out, err
}

// NextIDs answers count time-ordered 64-bit ids from the server, increasing.
func (c *Client) NextIDs(ctx context.Context, count int) ([]int64, error) {
	q, err := countQuery(count)
	if err != nil {
		return nil, err
	}
	var out struct {
		IDs []jint `json:"ids"`
	}
	err = c.call(ctx, request{method: "POST", path: "/v1/ids/next", query: q, safe: true}, 0, &out)
	return ints(out.IDs), err
}

// NextUUIDs answers count RFC 9562 version-7 UUIDs (format=uuidv7) over the same
// time, worker id and sequence as NextIDs: unique by construction across the
// servers of a store, increasing per server (as strings). Bits: 48 of
// unix_ts_ms, version 7, a 12-bit counter (rand_a), variant 10, a 22-bit
// worker id, 40 random bits.
func (c *Client) NextUUIDs(ctx context.Context, count int) ([]string, error) {
	q, err := countQuery(count)
	if err != nil {
		return nil, err
	}
	q.Set("format", "uuidv7")
	var out struct {
		IDs []string `json:"ids"`
	}
	err = c.call(ctx, request{method: "POST", path: "/v1/ids/next", query: q, safe: true}, 0, &out)
	return out.IDs, err
}

// DecodedID is a time-ordered id taken apart by the server's layout.
type DecodedID struct {
	ID int64
	// TimeMs is the start of its time unit, ms since the Unix epoch; Time the same in RFC 3339.
	TimeMs   int64
	Time     string
	Worker   int64
	Sequence int64
}

// DecodeID takes an id apart by the server's layout. ErrBadRequest for one
// that is not an id of it.
func (c *Client) DecodeID(ctx context.Context, id int64) (DecodedID, error) {
	var out struct {
		ID       jint   `json:"id"`
		TimeMs   jint   `json:"time_ms"`
		Time     string `json:"time"`
		Worker   jint   `json:"worker"`
		Sequence jint   `json:"sequence"`
	}
	err := c.call(ctx, request{method: "GET", path: "/v1/ids/" + strconv.FormatInt(id, 10), safe: true}, 0, &out)
	return DecodedID{int64(out.ID), int64(out.TimeMs), out.Time, int64(out.Worker), int64(out.Sequence)}, err
}

// Health answers GET /healthz (the store is reachable) from the first server that answers.
func (c *Client) Health(ctx context.Context) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	err := c.call(ctx, request{method: "GET", path: "/healthz", safe: true}, 0, &out)
	return out, err
}

// Status answers GET /v1/status: what the status page shows, as JSON.
func (c *Client) Status(ctx context.Context) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	err := c.call(ctx, request{method: "GET", path: "/v1/status", safe: true}, 0, &out)
	return out, err
}

// String says the lease without its token (a secret: it releases the
// values); %v and %+v use it. Token is "***" there.
func (l Lease) String() string {
	return fmt.Sprintf("Lease{Sequence:%q Ranges:%v Step:%d Token:***}", l.Sequence, l.Ranges, l.Step)
}

// GoString is String, for %#v.
func (l Lease) GoString() string { return l.String() }

// String says the ticket without its ticket string (it commits or releases
// the number); %v and %+v use it.
func (t Ticket) String() string {
	period := "nil"
	if t.Period != nil {
		period = fmt.Sprint(*t.Period)
	}
	return fmt.Sprintf("Ticket{Sequence:%q Value:%v Period:%s N:%d Ticket:***}", t.Sequence, t.Value, period, t.N)
}

// GoString is String, for %#v.
func (t Ticket) GoString() string { return t.String() }
