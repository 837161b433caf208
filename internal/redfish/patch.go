package redfish

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/bmlab/bmlab/internal/admission"
)

// maxBody is the largest request body the service reads.
const maxBody = 1 << 20

// checkContentType refuses a POST or PATCH that does not name JSON as its
// Content-Type (415), with a body or without: a browser holding Basic
// credentials sends them with a cross-site request it may make without
// asking (a form's text/plain, a fetch with no body and so no type), and
// only those lack an application/json type. A bodiless action without a
// type was accepted (EjectMedia, Manager.Reset, ResetBios,
// SubmitTestEvent; issue 32). The clients send one: sushy's EjectMedia and
// ResetBios try without a body first and send {} on a 415, gofish,
// redfishtool and fence_redfish always name application/json.
func checkContentType(r *http.Request) *apiError {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		return nil
	}
	detail := "The request must name Content-Type: application/json, even with no body."
	if ct == "" {
		ct = "(none)"
	}
	return newError(http.StatusUnsupportedMediaType, MsgHeaderInvalid, "Content-Type: "+truncate(ct, maxArgText)).with(detail)
}

// maxLoginBody is the largest session login body read: a user name and a
// password. A login is unauthenticated, so it gets no more than it needs.
const maxLoginBody = 4 << 10

// maxJSONDepth is how deeply a request body may nest objects and arrays;
// Redfish bodies nest a few levels (Boot, Attributes, Oem).
const maxJSONDepth = 32

// readObject reads c's JSON object body of at most maxBody bytes. An empty
// body is an empty object.
func readObject(c *call) (map[string]any, *apiError) {
	o, dup, aerr := parseCall(c)
	if dup != nil {
		return nil, duplicated(dup)
	}
	return o, aerr
}

// parseCall reads c's JSON object body of at most maxBody bytes, as
// parseObject does. At a vendor BMC its references are then mapped to the
// machine's ids (idView.mapRefs): the body is read, and charged to its
// budget, by parseObject alone, and mapped once decoded.
func parseCall(c *call) (map[string]any, *duplicateKeyError, *apiError) {
	o, dup, aerr := parseObject(c.r, maxBody)
	if o != nil && c.view != nil {
		c.view.mapRefs(o)
	}
	return o, dup, aerr
}

// duplicated is the error of a key given twice.
func duplicated(dup *duplicateKeyError) *apiError {
	return newError(http.StatusBadRequest, MsgPropertyDuplicate, dup.path()).
		with("A property may be given once in an object.")
}

// readObjectLimit reads a JSON object body of at most limit bytes. A key
// given twice in one object, at any depth, is refused (PropertyDuplicate
// naming it): with the last one winning, {"ResetType":"Explode",
// "ResetType":"ForceOff"} powered a system off.
func readObjectLimit(r *http.Request, limit int64) (map[string]any, *apiError) {
	o, dup, aerr := parseObject(r, limit)
	if dup != nil {
		return nil, duplicated(dup)
	}
	return o, aerr
}

// parseObject reads a JSON object body of at most limit bytes; a duplicate
// key is returned apart, for the caller to word.
func parseObject(r *http.Request, limit int64) (map[string]any, *duplicateKeyError, *apiError) {
	if r.ContentLength > limit {
		return nil, nil, newError(http.StatusRequestEntityTooLarge, MsgPayloadTooLarge).
			with(fmt.Sprintf("At most %d bytes.", limit))
	}
	raw, aerr := readBody(r, limit)
	if aerr != nil {
		return nil, nil, aerr
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return map[string]any{}, nil, nil
	}
	if !json.Valid(raw) {
		var v any
		detail := "The body is not valid JSON."
		if err := json.Unmarshal(raw, &v); err != nil {
			detail = err.Error()
		}
		return nil, nil, newError(http.StatusBadRequest, MsgMalformedJSON).with(detail)
	}
	if raw[0] != '{' {
		return nil, nil, newError(http.StatusBadRequest, MsgUnrecognizedRequestBody).with("The body must be a JSON object.")
	}
	w := walker{b: raw}
	if err := w.value(0); err != nil {
		var dup *duplicateKeyError
		switch {
		case errors.As(err, &dup):
			return nil, dup, nil
		case errors.Is(err, errTooMany):
			return nil, nil, newError(http.StatusRequestEntityTooLarge, MsgPayloadTooLarge).with(err.Error())
		}
		return nil, nil, newError(http.StatusBadRequest, MsgMalformedJSON).with(err.Error())
	}
	// What decoding makes: encoding/json's values take up to about 2.6
	// times the text (strings, long keys) plus about 115 bytes a value
	// (10,000 empty objects in 30 KB made 1.1 MB).
	if !admission.Reserve(r, decodeCost(len(raw), w.values)) {
		return nil, nil, busy(r, admission.WhyBody)
	}
	var o map[string]any
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, nil, newError(http.StatusBadRequest, MsgMalformedJSON).with(err.Error())
	}
	return o, nil, nil
}

// decodeCost is the memory charged for decoding a body of n bytes holding
// values JSON values.
func decodeCost(n, values int) int64 { return 3*int64(n) + 128*int64(values) }

// firstBodyBuffer is the buffer a body is first read into; it doubles as
// bytes arrive.
const firstBodyBuffer = 1024

// readBody reads r's body, at most limit bytes. The buffer grows as bytes
// arrive, never from the announced Content-Length: HTTP/2 streams that
// announced 1 MiB each and sent nothing held 1 MiB each, 250 to a
// connection (issue 32). Each growth is charged to the request's body
// budget (internal/admission), the old buffers included, which the garbage
// collector frees later; past it, 503 with Retry-After.
func readBody(r *http.Request, limit int64) ([]byte, *apiError) {
	body := http.MaxBytesReader(nil, r.Body, limit)
	buf := []byte(nil)
	for {
		if len(buf) == cap(buf) {
			n := int64(max(firstBodyBuffer, 2*cap(buf)))
			if n > limit+1 {
				n = limit + 1 // room to see the limit passed
			}
			if n <= int64(cap(buf)) {
				n = int64(cap(buf)) + firstBodyBuffer
			}
			if !admission.Reserve(r, n) {
				return nil, busy(r, admission.WhyBody)
			}
			buf = append(make([]byte, 0, n), buf...)
		}
		m, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, newError(http.StatusRequestEntityTooLarge, MsgPayloadTooLarge).
					with(fmt.Sprintf("At most %d bytes.", limit))
			}
			return nil, newError(http.StatusBadRequest, MsgUnrecognizedRequestBody).with(err.Error())
		}
	}
}

// busyText says which budget refused a request (internal/admission's whys).
var busyText = map[string]string{
	admission.WhySource:     "requests in flight from this address",
	admission.WhyTotal:      "requests in flight",
	admission.WhyAnonSource: "requests not yet authenticated from this address",
	admission.WhyAnonTotal:  "requests not yet authenticated",
	admission.WhyBody:       "request bodies",
}

// Busy answers a request refused for want of room (internal/admission's
// Refuser): 503 ServiceTemporarilyUnavailable with Retry-After, as a
// Redfish error body, whatever the path (the web console reads those too).
func Busy(w http.ResponseWriter, r *http.Request, retryAfter int, why string) {
	what := busyText[why]
	if what == "" {
		what = "requests"
	}
	secs := strconv.Itoa(retryAfter)
	e := newError(http.StatusServiceUnavailable, MsgServiceTemporarilyUnavailable, secs).
		with(fmt.Sprintf("The service holds as many %s as it may; retry in %s s.", what, secs))
	b, _ := json.Marshal(errorBody(e))
	h := w.Header()
	h["Odata-Version"] = hdrOData
	h["Cache-Control"] = hdrNoStore
	h["X-Content-Type-Options"] = hdrNosniff
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	h.Set("Retry-After", secs)
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(b)
}

// busy is the 503 of a request refused for want of room (internal/admission):
// what is full, and when to try again.
func busy(r *http.Request, why string) *apiError {
	secs := strconv.Itoa(admission.RetryAfter(r))
	return newError(http.StatusServiceUnavailable, MsgServiceTemporarilyUnavailable, secs).
		with(fmt.Sprintf("The service holds as many %s as it may; retry in %s s.", busyText[why], secs)).withHeader("Retry-After", secs)
}

// duplicateKeyError is a key given twice in one JSON object; keys holds the
// path to it, outermost first.
type duplicateKeyError struct{ keys []string }

func (e *duplicateKeyError) Error() string { return "duplicate key " + e.path() }

// path names the key as Parent/Key, each part cut short.
func (e *duplicateKeyError) path() string {
	parts := make([]string, len(e.keys))
	for i, k := range e.keys {
		parts[i] = truncate(k, maxArgText)
	}
	return truncate(strings.Join(parts, "/"), maxArg)
}

// maxJSONValues is the most values (members and array elements, at any
// depth) a request body may hold: a Redfish body has tens, a BIOS
// settings PATCH a few hundred. More is refused before any is decoded.
const maxJSONValues = 10_000

var (
	errTooDeep = fmt.Errorf("the body nests deeper than %d levels", maxJSONDepth)
	errTooMany = fmt.Errorf("the body holds more than %d values", maxJSONValues)
)

// walker checks a valid JSON text (json.Valid) for what encoding/json lets
// through: a key given twice in one object, and bodies too deep or with
// too many values. It decodes nothing but keys.
type walker struct {
	b      []byte
	i      int
	values int
}

func (w *walker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// str skips a string and returns it with its quotes.
func (w *walker) str() []byte {
	start := w.i
	w.i++ // "
	for w.i < len(w.b) && w.b[w.i] != '"' {
		if w.b[w.i] == '\\' {
			w.i++
		}
		w.i++
	}
	w.i++ // "
	return w.b[start:min(w.i, len(w.b))]
}

// key is a key's text, its escapes undone ("\u0041" is "A").
func key(quoted []byte) string {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1])
	}
	var k string
	_ = json.Unmarshal(quoted, &k)
	return k
}

func (w *walker) value(depth int) error {
	w.values++
	if w.values > maxJSONValues {
		return errTooMany
	}
	w.ws()
	if w.i >= len(w.b) {
		return errors.New("unexpected end of the body")
	}
	switch c := w.b[w.i]; c {
	case '{', '[':
		if depth >= maxJSONDepth {
			return errTooDeep
		}
		w.i++
		var seen map[string]struct{}
		for {
			w.ws()
			if w.i >= len(w.b) {
				return errors.New("unexpected end of the body")
			}
			if w.b[w.i] == '}' || w.b[w.i] == ']' {
				w.i++
				return nil
			}
			if w.b[w.i] == ',' {
				w.i++
				w.ws()
			}
			var k string
			if c == '{' {
				k = key(w.str())
				if _, dup := seen[k]; dup {
					return &duplicateKeyError{keys: []string{k}}
				}
				if seen == nil {
					seen = map[string]struct{}{}
				}
				seen[k] = struct{}{}
				w.ws()
				w.i++ // :
			}
			if err := w.value(depth + 1); err != nil {
				var dup *duplicateKeyError
				if c == '{' && errors.As(err, &dup) {
					dup.keys = append([]string{k}, dup.keys...)
				}
				return err
			}
		}
	case '"':
		w.str()
	default: // a number, true, false or null
		for w.i < len(w.b) && !strings.ContainsRune(",]} \t\n\r", rune(w.b[w.i])) {
			w.i++
		}
	}
	return nil
}

// noChange refuses a PATCH that changes nothing: an empty body
// (EmptyJSON), or one of annotations and empty objects only, such as a
// client's echo of @odata.id or {"Boot": {}} (NoOperation).
func (fs fields) noChange(body map[string]any) *apiError {
	if len(body) == 0 {
		return newError(http.StatusBadRequest, MsgEmptyJSON)
	}
	if !fs.changes(body) {
		return newError(http.StatusBadRequest, MsgNoOperation).
			with("The body holds only annotations or empty objects.")
	}
	return nil
}

// changes reports whether body sets any property: annotations (keys with
// @) set nothing, nor does an empty object.
func (fs fields) changes(body map[string]any) bool {
	for k, v := range body {
		if strings.Contains(k, "@") {
			continue
		}
		o, isObj := v.(map[string]any)
		if !isObj {
			return true
		}
		if f, ok := fs[k]; ok && f.sub != nil {
			if f.sub.changes(o) {
				return true
			}
			continue
		}
		for ok := range o {
			if !strings.Contains(ok, "@") {
				return true
			}
		}
	}
	return false
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
// are not listed) are ignored, as clients echo them back. At most
// maxMessages messages are returned, the last saying how many more there
// were (a body of 80,000 unknown keys was answered with 29 MB).
func (fs fields) check(body, rendered map[string]any) []messageObject {
	var l msgList
	fs.checkInto(body, rendered, &l)
	return l.list()
}

func (fs fields) checkInto(body, rendered map[string]any, l *msgList) {
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := body[k]
		f, ok := fs[k]
		if !ok {
			if strings.Contains(k, "@") {
				continue
			}
			if _, has := rendered[k]; has {
				l.add(MsgPropertyNotWritable, k)
			} else {
				l.add(MsgPropertyUnknown, k)
			}
			continue
		}
		switch {
		case f.sub != nil:
			o, ok := v.(map[string]any)
			if !ok {
				l.add(MsgPropertyValueTypeError, argText(v), k)
				continue
			}
			sub, _ := rendered[k].(map[string]any)
			f.sub.checkInto(o, sub, l)
		case f.kind == kindObject:
			if _, ok := v.(map[string]any); !ok {
				l.add(MsgPropertyValueTypeError, argText(v), k)
			}
		case f.kind == kindArray:
			if _, ok := v.([]any); !ok {
				l.add(MsgPropertyValueTypeError, argText(v), k)
			}
		case f.kind == kindInt:
			if n, ok := v.(float64); !ok || n != float64(int64(n)) || n < 0 {
				l.add(MsgPropertyValueTypeError, argText(v), k)
			}
		case f.kind == kindBool:
			if _, ok := v.(bool); !ok {
				l.add(MsgPropertyValueTypeError, argText(v), k)
			}
		default:
			s, ok := v.(string)
			if !ok {
				l.add(MsgPropertyValueTypeError, argText(v), k)
				continue
			}
			if f.enum != nil && !slices.Contains(f.enum, s) {
				l.add(MsgPropertyValueNotInList, argText(s), k)
			}
		}
	}
}

// argText is a value as a message argument: strings as they are, anything
// else as its JSON (null as "null"), cut to maxArgText bytes: a client's
// value is not echoed at length (a 1 MiB string came back as a 3.1 MB body).
func argText(v any) string {
	if s, ok := v.(string); ok {
		return truncate(s, maxArgText)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return truncate(string(b), maxArgText)
}
