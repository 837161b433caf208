package redfish

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// entry is a rendered resource: its body and the header values that go with
// it, computed once per render.
type entry struct {
	gen   uint64
	body  []byte
	etag  string
	hETag []string
	hLen  []string
	hType []string
	hLink []string // Link: the JSON Schema that describes the body
}

func newEntry(gen uint64, body []byte, ctype []string) *entry {
	e := &entry{gen: gen, body: body, hType: ctype, etag: etagOf(body)}
	e.hETag = []string{e.etag}
	e.hLen = []string{strconv.Itoa(len(body))}
	return e
}

// write sends the entry with its headers.
func (e *entry) write(w http.ResponseWriter, status int) {
	h := w.Header()
	h["Content-Type"] = e.hType
	h["Etag"] = e.hETag
	h["Content-Length"] = e.hLen
	if e.hLink != nil {
		h["Link"] = e.hLink
	}
	w.WriteHeader(status)
	w.Write(e.body)
}

// etagOf is a strong ETag: a hash of the body.
func etagOf(body []byte) string {
	h := fnv.New64a()
	h.Write(body)
	return `"` + strconv.FormatUint(h.Sum64(), 16) + `"`
}

func renderJSON(gen uint64, o any) *entry {
	b, err := json.Marshal(o)
	if err != nil {
		// The builders make maps of strings, numbers and slices only.
		panic("redfish: cannot encode a resource: " + err.Error())
	}
	e := newEntry(gen, b, hdrJSON)
	if m, ok := o.(obj); ok {
		if t, ok := m["@odata.type"].(string); ok {
			e.hLink = schemaLink(t)
		}
	}
	return e
}

// schemaLink is the Link header DSP0266 §8.3 asks of GET and HEAD answers:
// the DMTF-published JSON Schema of the resource's type, versioned when the
// type is ("#ServiceRoot.v1_11_0.ServiceRoot" → ServiceRoot.v1_11_0.json,
// "#ComputerSystemCollection.ComputerSystemCollection" →
// ComputerSystemCollection.json).
func schemaLink(odataType string) []string {
	t := strings.TrimPrefix(odataType, "#")
	parts := strings.Split(t, ".")
	name := parts[0]
	if len(parts) == 3 {
		name += "." + parts[1]
	}
	if name == "" {
		return nil
	}
	return []string{"<https://redfish.dmtf.org/schemas/v1/" + name + ".json>; rel=describedby"}
}

// renderCache keeps the last rendering of each resource, keyed by its
// canonical URI and valid while the machine's Generation is unchanged.
type renderCache struct {
	mu sync.RWMutex
	m  map[string]*entry
}

func (c *renderCache) get(key string, gen uint64) *entry {
	c.mu.RLock()
	e := c.m[key]
	c.mu.RUnlock()
	if e != nil && e.gen == gen {
		return e
	}
	return nil
}

func (c *renderCache) put(key string, e *entry) {
	c.mu.Lock()
	c.m[strings.Clone(key)] = e
	c.mu.Unlock()
}
