package redfish

import (
	"encoding/json"
	"hash/fnv"
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
}

func newEntry(gen uint64, body []byte, ctype []string) *entry {
	e := &entry{gen: gen, body: body, hType: ctype, etag: etagOf(body)}
	e.hETag = []string{e.etag}
	e.hLen = []string{strconv.Itoa(len(body))}
	return e
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
	return newEntry(gen, b, hdrJSON)
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
