package labconfig

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// checkShape reads the file as a YAML tree and compares it with Config's
// fields before anything is decoded, so that every key it does not know and
// every value of the wrong type is reported at once, each with its path in
// the file (network.bridges[0].mtu), its line and, for an unknown key, the
// known key nearest to it. Decoding through JSON, as sigs.k8s.io/yaml
// does, names only a Go struct and stops at the first.
func checkShape(data []byte) error {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("not YAML: %s", syntaxError(err))
	}
	if len(doc.Content) == 0 {
		return nil // an empty file is the seed lab
	}
	var errs []error
	shape(doc.Content[0], reflect.TypeFor[Config](), "", &errs)
	return errors.Join(errs...)
}

// parserProblems are the YAML parser's own problems (go.yaml.in/yaml/v3
// parserc.go), as opposed to its scanner's. For those the library
// reports the line counted from 0 (decode.go's fail: only a scanner
// error's line is moved on by one), so an unclosed '[' on line 10 would
// be "line 9".
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

var syntaxLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// syntaxError is the YAML library's syntax error with the line counted
// from 1 as an editor counts it: for a structure left open, the line where
// it opens (or the next).
func syntaxError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	m := syntaxLine.FindStringSubmatch(msg)
	if m == nil || !parserProblems[m[2]] {
		return msg
	}
	n, _ := strconv.Atoi(m[1])
	return fmt.Sprintf("line %d: %s", n+1, m[2])
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

func shape(n *yamlv3.Node, t reflect.Type, path string, errs *[]error) {
	if n.Kind == yamlv3.AliasNode {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return // null leaves the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	field := path
	if field == "" {
		field = "the file"
	}
	bad := func(want, fix string) {
		got := n.Value
		switch n.Kind {
		case yamlv3.MappingNode:
			got = "a mapping"
		case yamlv3.SequenceNode:
			got = "a list"
		default:
			if len(got) > 40 {
				got = got[:40] + "…"
			}
			got = fmt.Sprintf("%q", got)
		}
		msg := fmt.Sprintf("%s (line %d): want %s, got %s", field, n.Line, want, got)
		if fix != "" {
			msg += "; " + fix
		}
		*errs = append(*errs, errors.New(msg))
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		if n.Kind != yamlv3.ScalarNode {
			bad("a value written as text", "")
			return
		}
		v := reflect.New(t).Interface().(encoding.TextUnmarshaler)
		if err := v.UnmarshalText([]byte(n.Value)); err != nil {
			*errs = append(*errs, fmt.Errorf("%s (line %d): %q is not %s: %v", field, n.Line, n.Value, textKind(t), unwrapText(err)))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			bad("a mapping of "+strings.Join(keys(t), ", "), "")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub := join(path, k.Value)
			f, ok := fieldByKey(t, k.Value)
			if !ok {
				msg := fmt.Sprintf("%s (line %d): unknown key", sub, k.Line)
				if near := nearest(k.Value, keys(t)); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				} else if near := nearestPath(k.Value, t, path); near != "" {
					msg += fmt.Sprintf("; did you mean %s?", near)
				} else {
					msg += "; the keys here are " + strings.Join(keys(t), ", ")
				}
				*errs = append(*errs, errors.New(msg))
				continue
			}
			shape(v, f.Type, sub, errs)
		}
	case reflect.Slice:
		if n.Kind != yamlv3.SequenceNode {
			bad("a list", "write it as [a, b] or one '- ' line each")
			return
		}
		for i, item := range n.Content {
			shape(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		if n.Kind != yamlv3.MappingNode {
			bad("a mapping", "")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			shape(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), errs)
		}
	case reflect.String:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!str" {
			bad("a string", "quote it")
		}
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!int" {
			bad("a whole number", "")
		}
	case reflect.Bool:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!bool" {
			bad("true or false", "")
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldByKey finds the field a key of the file sets (its json tag),
// among the fields of the struct's embedded structs too, as encoding/json
// promotes them (a record the lab file shares with the plan).
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for _, f := range reflect.VisibleFields(t) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == key && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keys are the keys a struct takes, in its order, an embedded struct's in
// its place.
func keys(t reflect.Type) []string {
	var out []string
	for _, f := range reflect.VisibleFields(t) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" && !f.Anonymous {
			out = append(out, name)
		}
	}
	return out
}

// nearest is the known key closest to key, when it is close enough to be
// a slip (a third of its letters, at most 3 edits, case aside).
func nearest(key string, known []string) string {
	best, bestD := "", 0
	for _, k := range known {
		d := distance(strings.ToLower(key), strings.ToLower(k))
		if best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > 3 || bestD > (len(key)+2)/3 {
		return ""
	}
	return best
}

// distance is the Damerau-Levenshtein distance (adjacent swaps count one).
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = slices.Min([]int{d[i-1][j] + 1, d[i][j-1] + 1, d[i-1][j-1] + cost})
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// nearestPath looks for the key one or two levels down (a key written
// at the wrong depth), and names its full path.
func nearestPath(key string, t reflect.Type, path string) string {
	var paths, names []string
	var walk func(t reflect.Type, at string, depth int)
	walk = func(t reflect.Type, at string, depth int) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 2 || reflect.PointerTo(t).Implements(textUnmarshaler) {
			return
		}
		for _, k := range keys(t) {
			f, _ := fieldByKey(t, k)
			if depth > 0 {
				paths, names = append(paths, join(at, k)), append(names, k)
			}
			walk(f.Type, join(at, k), depth+1)
		}
	}
	walk(t, path, 0)
	near := nearest(key, names)
	for i, n := range names {
		if n == near {
			return paths[i]
		}
	}
	return ""
}

func textKind(t reflect.Type) string {
	switch t.String() {
	case "netip.Prefix":
		return "an address with a prefix length (10.0.0.0/24)"
	case "netip.Addr":
		return "an IP address"
	}
	return "a " + t.String()
}

// unwrapText drops the parser's echo of its own call
// (`netip.ParsePrefix("10.0.0.0/33"): `) from its message.
func unwrapText(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "): "); i >= 0 && (strings.HasPrefix(msg, "netip.") || strings.HasPrefix(msg, "Parse")) {
		return msg[i+3:]
	}
	return msg
}
