package redfish

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// maxBody is the largest request body the service reads.
const maxBody = 1 << 20

// checkContentType refuses a request body that is not JSON (415). A request
// without a body (an action without parameters) needs no Content-Type, but
// one that names a type names JSON, empty or not: an empty text/plain POST
// is what a browser's cross-site form sends.
func checkContentType(r *http.Request) *apiError {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength <= 0 {
		// No body, or chunked with no type: judged by its content. A
		// browser always names a type, so this is no cross-site door.
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		return nil
	}
	return newError(http.StatusUnsupportedMediaType, MsgHeaderInvalid, "Content-Type: "+ct).
		with("The request body must be application/json.")
}

// readObject reads a JSON object body. An empty body is an empty object.
func readObject(r *http.Request) (map[string]any, *apiError) {
	raw, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, newError(http.StatusRequestEntityTooLarge, MsgPayloadTooLarge)
		}
		return nil, newError(http.StatusBadRequest, MsgUnrecognizedRequestBody).with(err.Error())
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, newError(http.StatusBadRequest, MsgMalformedJSON).with(err.Error())
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, newError(http.StatusBadRequest, MsgUnrecognizedRequestBody).with("The body must be a JSON object.")
	}
	return o, nil
}

// kind is the JSON type a writable property takes.
type kind int

const (
	kindString kind = iota // enum when field.enum is set
	kindBool
	kindObject // any object (its members are checked elsewhere)
	kindInt    // a whole number, at least 0
	kindArray  // any array (its members are checked elsewhere)
)

// field describes a writable property.
type field struct {
	kind kind
	enum []string
	sub  fields // an object whose members are these
}

// fields is the writable part of a resource.
type fields map[string]field

// check compares a request body with the writable properties. A property
// the resource has but may not be written is PropertyNotWritable; one it
// does not have is PropertyUnknown. Annotations (@odata.*, @Redfish.* that
// are not listed) are ignored, as clients echo them back.
func (fs fields) check(body, rendered map[string]any) []messageObject {
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var msgs []messageObject
	for _, k := range keys {
		v := body[k]
		f, ok := fs[k]
		if !ok {
			if strings.Contains(k, "@") {
				continue
			}
			if _, has := rendered[k]; has {
				msgs = append(msgs, newMessage(MsgPropertyNotWritable, k))
			} else {
				msgs = append(msgs, newMessage(MsgPropertyUnknown, k))
			}
			continue
		}
		switch {
		case f.sub != nil:
			o, ok := v.(map[string]any)
			if !ok {
				msgs = append(msgs, newMessage(MsgPropertyValueTypeError, argText(v), k))
				continue
			}
			sub, _ := rendered[k].(map[string]any)
			msgs = append(msgs, f.sub.check(o, sub)...)
		case f.kind == kindObject:
			if _, ok := v.(map[string]any); !ok {
				msgs = append(msgs, newMessage(MsgPropertyValueTypeError, argText(v), k))
			}
		case f.kind == kindArray:
			if _, ok := v.([]any); !ok {
				msgs = append(msgs, newMessage(MsgPropertyValueTypeError, argText(v), k))
			}
		case f.kind == kindInt:
			if n, ok := v.(float64); !ok || n != float64(int64(n)) || n < 0 {
				msgs = append(msgs, newMessage(MsgPropertyValueTypeError, argText(v), k))
			}
		case f.kind == kindBool:
			if _, ok := v.(bool); !ok {
				msgs = append(msgs, newMessage(MsgPropertyValueTypeError, argText(v), k))
			}
		default:
			s, ok := v.(string)
			if !ok {
				msgs = append(msgs, newMessage(MsgPropertyValueTypeError, argText(v), k))
				continue
			}
			if f.enum != nil && !slices.Contains(f.enum, s) {
				msgs = append(msgs, newMessage(MsgPropertyValueNotInList, s, k))
			}
		}
	}
	return msgs
}

// argText is a value as a message argument: strings as they are, anything
// else as its JSON (null as "null").
func argText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}
