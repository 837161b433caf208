package yamljson

import (
	"net/netip"
	"strings"
	"testing"
)

type doc struct {
	Name  string     `json:"name"`
	Addr  netip.Addr `json:"addr"`
	Count int        `json:"count,omitempty"`
	Tags  []string   `json:"tags,omitempty"`
	Inner struct {
		On bool `json:"on"`
	} `json:"inner"`
}

// TestRoundTrip: json tags name the keys, a type's text form applies,
// keys come out sorted, and what is written reads back the same.
func TestRoundTrip(t *testing.T) {
	in := doc{Name: "lab", Addr: netip.MustParseAddr("fd00::5"), Count: 3, Tags: []string{"a", "b"}}
	in.Inner.On = true
	b, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := "addr: fd00::5\ncount: 3\ninner:\n  \"on\": true\nname: lab\ntags:\n- a\n- b\n"
	if string(b) != want {
		t.Errorf("Marshal:\n%s\nwant:\n%s", b, want)
	}
	var out doc
	if err := UnmarshalStrict(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Name != in.Name || out.Addr != in.Addr || out.Count != 3 || len(out.Tags) != 2 || !out.Inner.On {
		t.Errorf("read back %+v, want %+v", out, in)
	}
}

// TestStrict: UnmarshalStrict refuses a key the type has no field for and
// a key written twice; Unmarshal takes the first and drops unknown keys.
func TestStrict(t *testing.T) {
	var d doc
	if err := UnmarshalStrict([]byte("name: a\nnmae: b\n"), &d); err == nil || !strings.Contains(err.Error(), `unknown field "nmae"`) {
		t.Errorf("unknown key: %v", err)
	}
	if err := UnmarshalStrict([]byte("name: a\nname: b\n"), &d); err == nil || !strings.Contains(err.Error(), "already set") {
		t.Errorf("key twice: %v", err)
	}
	if err := Unmarshal([]byte("name: a\nnmae: b\n"), &d); err != nil || d.Name != "a" {
		t.Errorf("Unmarshal with an unknown key = %v, %+v", err, d)
	}
}

// TestKeysOfOtherTypes: a mapping's number and boolean keys become the
// strings JSON needs.
func TestKeysOfOtherTypes(t *testing.T) {
	var m map[string]string
	if err := Unmarshal([]byte("1: one\ntrue: yes-key\n2.5: half\n"), &m); err != nil {
		t.Fatal(err)
	}
	if m["1"] != "one" || m["true"] != "yes-key" || m["2.5"] != "half" {
		t.Errorf("keys: %v", m)
	}
}
