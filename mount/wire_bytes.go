package mount

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// ByteString is a string that crosses the control socket (and --json
// output) byte for byte: file and snapshot names are bytes, not UTF-8,
// and encoding/json replaces every invalid byte of a string with U+FFFD,
// so a name such as "a\xff" would reach the mount as another name. Valid
// UTF-8 is encoded as the JSON string it always was (the wire is
// unchanged for such names, and a mount or client of an older deltafs
// reads it); any other bytes as {"bytes": BASE64}.
type ByteString string

// byteStringObject is the JSON form of a ByteString that is not UTF-8.
type byteStringObject struct {
	Bytes []byte `json:"bytes"`
}

// MarshalJSON implements json.Marshaler.
func (s ByteString) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(s)) {
		return json.Marshal(string(s))
	}
	return json.Marshal(byteStringObject{Bytes: []byte(s)})
}

// errByteString is a JSON value that is neither form of a ByteString.
var errByteString = errors.New(`want a string or {"bytes": BASE64}`)

// UnmarshalJSON implements json.Unmarshaler.
func (s *ByteString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = ByteString(v)
		return nil
	case len(b) > 0 && b[0] == '{':
		var o byteStringObject
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*s = ByteString(o.Bytes)
		return nil
	case string(b) == "null": // as for a string: left as it is
		return nil
	}
	return errByteString
}

// MarshalJSON writes r with its snapshot names as ByteStrings.
func (r RevInfo) MarshalJSON() ([]byte, error) {
	type plain RevInfo // without these methods
	out := struct {
		plain
		Snapshots []ByteString `json:"snapshots,omitempty"`
	}{plain: plain(r)}
	for _, s := range r.Snapshots {
		out.Snapshots = append(out.Snapshots, ByteString(s))
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RevInfo) UnmarshalJSON(b []byte) error {
	type plain RevInfo
	var in struct {
		plain
		Snapshots []ByteString `json:"snapshots,omitempty"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*r = RevInfo(in.plain)
	r.Snapshots = nil
	for _, s := range in.Snapshots {
		r.Snapshots = append(r.Snapshots, string(s))
	}
	return nil
}
