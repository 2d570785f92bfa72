package keysmith

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// jint is an integer the server sends as a JSON number or (with as=string) a string.
type jint int64

func (j *jint) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 1 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %s", b)
	}
	*j = jint(v)
	return nil
}

// optInt is a jint that may be null or absent.
type optInt struct {
	v   int64
	set bool
}

func (o *optInt) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*o = optInt{}
		return nil
	}
	var j jint
	if err := j.UnmarshalJSON(b); err != nil {
		return err
	}
	*o = optInt{int64(j), true}
	return nil
}

func (o optInt) ptr() *int64 {
	if !o.set {
		return nil
	}
	v := o.v
	return &v
}

// Number is a number of a numbered sequence as text: an integer in decimal,
// or a formatted number ("INV-2026-0042").
type Number string

// UnmarshalJSON takes a JSON string or a JSON integer.
func (n *Number) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*n = Number(s)
		return nil
	}
	var j jint
	if err := j.UnmarshalJSON(b); err != nil {
		return err
	}
	*n = Number(strconv.FormatInt(int64(j), 10))
	return nil
}

func ints(in []jint) []int64 {
	out := make([]int64, len(in))
	for i, v := range in {
		out[i] = int64(v)
	}
	return out
}
