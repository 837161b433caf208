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
//
// It is bounded: an inventory scan of 100,000 systems would otherwise keep
// every body it rendered (one GET of each system took vbmcd from 200 MB to
// 730 MB). Entries live in two generations of at most limit bytes each: new
// ones go to cur; when cur is full it becomes old and the previous old is
// dropped; a hit in old moves the entry back to cur. What is read often
// stays, whatever was read once ages out within two generations, and a
// lookup stays one map read.
type renderCache struct {
	mu       sync.RWMutex
	cur, old map[string]*entry
	curBytes int
	limit    int
}

// defaultRenderCacheBytes bounds each of the two generations: 16 MiB holds
// the system, BIOS and inventory bodies of about a thousand machines.
const defaultRenderCacheBytes = 16 << 20

func (c *renderCache) init(limit int) {
	c.cur, c.old, c.curBytes, c.limit = map[string]*entry{}, map[string]*entry{}, 0, limit
}

// cost is what an entry holds in memory, roughly: its body, its key and
// the entry with its header values.
func cost(key string, e *entry) int { return len(e.body) + len(key) + 256 }

func (c *renderCache) get(key string, gen uint64) *entry {
	c.mu.RLock()
	e, promote := c.cur[key], false
	if e == nil {
		e = c.old[key]
		promote = e != nil
	}
	c.mu.RUnlock()
	if e == nil || e.gen != gen {
		return nil
	}
	if promote {
		c.put(key, e)
	}
	return e
}

func (c *renderCache) put(key string, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev := c.cur[key]; prev != nil {
		c.curBytes -= cost(key, prev)
	} else {
		key = strings.Clone(key) // the caller's may be a request's path
	}
	c.cur[key] = e
	c.curBytes += cost(key, e)
	if c.curBytes > c.limit {
		c.old, c.cur, c.curBytes = c.cur, map[string]*entry{}, 0
	}
}

// size reports the entries and bytes the cache holds (an entry moved back
// from old is counted once).
func (c *renderCache) size() (entries, bytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for k, e := range c.cur {
		entries, bytes = entries+1, bytes+cost(k, e)
	}
	for k, e := range c.old {
		if c.cur[k] != e {
			entries, bytes = entries+1, bytes+cost(k, e)
		}
	}
	return entries, bytes
}
