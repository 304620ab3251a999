package records

import (
	"bytes"
	"encoding/json"
)

// Kafka's generated *JsonConverter classes write fields in schema order, with
// lowerCamel names, UUIDs as their base64 text, nullable values as null,
// fields absent at the version left out, and tagged fields only when they
// differ from their default. jsonObject is the ordered builder that lets each
// message follow those rules in a few lines.
//
// Jackson does not escape <, > or &, so neither do we. (One known difference
// remains: Go escapes U+2028 and U+2029, Jackson does not.)

// jsonObject accumulates "name":value pairs in insertion order.
type jsonObject struct {
	buf bytes.Buffer
	err error
}

// add appends one field; v is any value encoding/json can marshal.
func (o *jsonObject) add(name string, v any) {
	if o.err != nil {
		return
	}
	if o.buf.Len() == 0 {
		o.buf.WriteByte('{')
	} else {
		o.buf.WriteByte(',')
	}
	o.write(name)
	o.buf.WriteByte(':')
	o.write(v)
}

func (o *jsonObject) write(v any) {
	enc := json.NewEncoder(&o.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		o.err = err
		return
	}
	o.buf.Truncate(o.buf.Len() - 1) // Encode appends a newline.
}

// bytes closes the object and returns it.
func (o *jsonObject) bytes() (json.RawMessage, error) {
	if o.err != nil {
		return nil, o.err
	}
	if o.buf.Len() == 0 {
		return json.RawMessage("{}"), nil
	}
	o.buf.WriteByte('}')
	return json.RawMessage(o.buf.Bytes()), nil
}

// jsonArray renders a slice of sub-structs, each through fill. Non-nullable
// arrays print [] when empty, never null.
func jsonArray[T any](vs []T, fill func(*jsonObject, *T)) json.RawMessage {
	out := []byte{'['}
	for i := range vs {
		if i > 0 {
			out = append(out, ',')
		}
		var o jsonObject
		fill(&o, &vs[i])
		b, err := o.bytes()
		if err != nil {
			b = json.RawMessage("null")
		}
		out = append(out, b...)
	}
	return append(out, ']')
}

// orEmpty makes a nil non-nullable slice print as [] instead of null.
func orEmpty[T any](vs []T) []T {
	if vs == nil {
		return []T{}
	}
	return vs
}

// jsonWriter is implemented by every message in this package; Record's
// MarshalJSON uses it to print the data object at the record's version.
type jsonWriter interface {
	writeJSON(o *jsonObject, version int16)
}
