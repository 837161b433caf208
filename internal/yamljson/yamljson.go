// Package yamljson reads and writes YAML through the JSON form of Go
// values, so that `json` tags name the keys and a type's JSON methods
// (netip.Addr's, say) apply, as Kubernetes and OpenShift files are
// written: Marshal writes the JSON form as YAML with its keys sorted;
// Unmarshal reads YAML into its JSON form and decodes that. It is what
// labctl's files (the lab file, install-config, agent-config, the
// hybrid mode's manifests) go through, on go.yaml.in/yaml alone.
//
// What it does not do: keep comments or key order (go.yaml.in/yaml/v3's
// Node does, where a file must keep them), or turn a YAML number into a
// string field (a file that means a string quotes it).
package yamljson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v2"
)

// Marshal writes v as YAML: its JSON form, keys sorted.
func Marshal(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	// yaml.v2 keeps JSON's numbers as ints or floats, as they were written.
	var obj any
	if err := yaml.Unmarshal(j, &obj); err != nil {
		return nil, err
	}
	return yaml.Marshal(obj)
}

// Unmarshal reads YAML into v through its JSON form.
func Unmarshal(data []byte, v any) error { return unmarshal(data, v, false) }

// UnmarshalStrict is Unmarshal that refuses a key v has no field for, and
// a key written twice.
func UnmarshalStrict(data []byte, v any) error { return unmarshal(data, v, true) }

func unmarshal(data []byte, v any, strict bool) error {
	var obj any
	read := yaml.Unmarshal
	if strict {
		read = yaml.UnmarshalStrict
	}
	if err := read(data, &obj); err != nil {
		return err
	}
	j, err := json.Marshal(jsonable(obj))
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	if strict {
		d.DisallowUnknownFields()
	}
	return d.Decode(v)
}

// jsonable turns what yaml.v2 decodes (mappings with keys of any type)
// into what encoding/json encodes (string keys).
func jsonable(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			m[key(k)] = jsonable(val)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = jsonable(val)
		}
		return out
	}
	return v
}

func key(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case nil:
		return "null"
	}
	return fmt.Sprint(k)
}
