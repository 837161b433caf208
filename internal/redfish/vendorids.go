package redfish

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
)

// Vendor ids at a BMC of its own. A listener that serves many machines
// names each System, Manager and Chassis by its machine id; a connection to
// one machine's own BMC (AtBMC) of a vendor personality sees the vendor's
// ids instead (personality.SystemID, ManagerID, ChassisID: iDRAC's
// System.Embedded.1 and iDRAC.Embedded.1, iLO's and Supermicro's 1), and
// its FirmwareInventory members by their component alone (BIOS, BMC, NIC),
// so that only the System's UUID property names the machine's UUID. The
// builders keep writing machine ids; the view maps them both ways at the
// edge: a request's path is mapped in before it is routed, the references
// of a decoded request body (readObject: every "@odata.id" and each entry
// of "Targets", the two places a Redfish request names a resource) are
// mapped in after the body was read within its budget, and an answer's
// body and Location header are mapped out before they are sent. Nothing
// else of a request is touched: an event Destination or an image URL that
// holds /redfish/v1/Systems/1 is the client's own string. The render cache
// keeps such a BMC's bodies under a key of their own (already mapped), so
// a GET of a cached resource maps nothing.

// idView maps one machine's ids to its vendor's and back.
type idView struct {
	id  string // the machine id
	key string // the render cache's prefix for this view
	// in maps the vendor's paths ("Systems/" + vendor id, Managers/,
	// Chassis/, the older Dell/Managers/ that Dell's clients still call,
	// the FirmwareInventory members) to the machine id's.
	in [][2]string
	// out maps the machine id's paths to the vendor's, and the Id of the
	// System, Manager or Chassis itself (by the route's scope), and of a
	// FirmwareInventory member.
	out [4]*strings.Replacer
	// always: a body that names no machine id may still be mapped (the
	// collections' slashed links).
	always bool
}

// idViews keeps one idView per machine and personality: views are
// built once, not per request (a few hundred bytes each; a removed
// machine's stay until vbmcd restarts).
type idViews struct{ m sync.Map }

// viewOf returns the vendor view of a request that came in through its
// machine's own BMC of a vendor personality; nil on the shared listener,
// for a generic machine, or when the machine is gone.
func (s *Server) viewOf(c *call) *idView {
	if c.bmc == "" {
		return nil
	}
	m, err := s.svc.Get(c.bmc)
	if err != nil {
		return nil
	}
	p, _ := s.personaOf(m)
	if p.SystemID == "" {
		return nil
	}
	key := m.ID + "\x00" + string(p.Name)
	if v, ok := s.views.m.Load(key); ok {
		return v.(*idView)
	}
	v := newIDView(m.ID, p)
	s.views.m.Store(key, v)
	return v
}

// outPrefixes are what comes right before a path that the out mapping
// rewrites: a JSON string's quote, or a quote or space in a message's
// text. A path inside a URL (https://h/redfish/v1/Systems/<id>, a
// client's event Destination or image) follows a host or a port, and is
// left as it is.
var outPrefixes = []string{`"`, `'`, ` `}

func newIDView(id string, p *personality.Personality) *idView {
	v := &idView{id: id, key: "bmc\x00" + id + "\x00" + string(p.Name) + "\x00"}
	own := [4][2]string{{"Systems", p.SystemID}, {"Managers", p.ManagerID}, {"Chassis", p.ChassisID}, {"Dell/Managers", p.ManagerID}}
	var paths, ids []string
	out := func(mine, vendor string) {
		for _, pre := range outPrefixes {
			paths = append(paths, pre+mine, pre+vendor)
		}
	}
	for _, o := range own {
		vendor, mine := rootURI+"/"+o[0]+"/"+o[1], rootURI+"/"+o[0]+"/"+id
		v.in = append(v.in, [2]string{vendor, mine})
		out(mine, vendor)
	}
	for _, fc := range machine.FirmwareComponents {
		mineID := string(fc) + "-" + id // firmwareItemID
		vendor, mine := firmwareInventoryURI+"/"+string(fc), firmwareInventoryURI+"/"+mineID
		v.in = append(v.in, [2]string{vendor, mine})
		out(mine, vendor)
		ids = append(ids, `"Id":"`+mineID+`"`, `"Id":"`+string(fc)+`"`)
	}
	if p.SlashedCollections {
		for _, coll := range []string{"Systems", "Managers", "Chassis"} {
			paths = append(paths, `"`+rootURI+"/"+coll+`"`, `"`+rootURI+"/"+coll+`/"`)
		}
		v.always = true
	}
	paths = append(paths, ids...)
	idProp := func(vendor string) []string { return []string{`"Id":"` + id + `"`, `"Id":"` + vendor + `"`} }
	v.out[scopeNone] = strings.NewReplacer(paths...)
	v.out[scopeSystem] = strings.NewReplacer(append(idProp(p.SystemID), paths...)...)
	v.out[scopeManager] = strings.NewReplacer(append(idProp(p.ManagerID), paths...)...)
	v.out[scopeChassis] = strings.NewReplacer(append(idProp(p.ChassisID), paths...)...)
	return v
}

// mapIn turns a request's path that names the vendor's System, Manager,
// Chassis or FirmwareInventory member into the machine id's. The machine
// id itself is still accepted.
func (v *idView) mapIn(p string) string {
	for _, in := range v.in {
		if rest, ok := strings.CutPrefix(p, in[0]); ok && (rest == "" || rest[0] == '/') {
			return in[1] + rest
		}
	}
	return p
}

// mapRefs maps, in place, the references of a decoded request body: the
// value of every "@odata.id" and each string of a "Targets" list
// (SimpleUpdate's, a list of URIs in the UpdateService schema), at any
// depth: a link to a resource is an object holding its @odata.id. Every
// other string is the client's own.
func (v *idView) mapRefs(o map[string]any) {
	for k, val := range o {
		switch val := val.(type) {
		case string:
			if k == "@odata.id" {
				o[k] = v.mapIn(val)
			}
		case map[string]any:
			v.mapRefs(val)
		case []any:
			for i, e := range val {
				switch e := e.(type) {
				case string:
					if k == "Targets" {
						val[i] = v.mapIn(e)
					}
				case map[string]any:
					v.mapRefs(e)
				}
			}
		}
	}
}

// mapOut maps a body (or a header value) written for the machine id.
func (v *idView) mapOut(c *call, b []byte) []byte {
	sc := scopeNone
	if c.rt != nil && len(c.rt.segs) == 2 {
		sc = c.rt.scope // the System, Manager or Chassis itself: its Id too
	}
	r := v.out[sc]
	if !v.always && !bytes.Contains(b, []byte(v.id)) {
		return b
	}
	return []byte(r.Replace(string(b)))
}

// idWriter holds an answer until the handler is done, then maps it out.
// A handler that flushes (a 413 over HTTP/2) sends what it wrote so far,
// mapped, and each later write is mapped as it comes.
type idWriter struct {
	http.ResponseWriter
	c         *call
	v         *idView
	status    int
	buf       bytes.Buffer
	streaming bool
	raw       bool // what is written is mapped already
}

// mapped says that what the handler writes from now on is mapped already
// (a body from the render cache): it goes out as it is.
func (w *idWriter) mapped() {
	w.raw = true
	w.streaming = true
}

func (w *idWriter) WriteHeader(code int) {
	if w.streaming {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.status == 0 {
		w.status = code
	}
}

func (w *idWriter) Write(b []byte) (int, error) {
	if w.raw {
		return w.ResponseWriter.Write(b)
	}
	if w.streaming {
		_, err := w.ResponseWriter.Write(w.v.mapOut(w.c, b))
		return len(b), err
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.buf.Write(b)
}

// Flush sends what is held and streams from then on.
func (w *idWriter) Flush() {
	if !w.streaming {
		w.Header().Del("Content-Length")
		w.finish()
		w.streaming = true
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *idWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish sends the held answer, mapped.
func (w *idWriter) finish() {
	if w.streaming {
		return
	}
	w.streaming = true
	h := w.Header()
	if loc := h.Get("Location"); loc != "" {
		// A quote before it, as in a body: the out mapping rewrites paths
		// that follow one.
		h.Set("Location", string(w.v.mapOut(w.c, []byte(`"`+loc)))[1:])
	}
	if w.status == 0 {
		return // nothing written: net/http answers 200 with no body
	}
	body := w.v.mapOut(w.c, w.buf.Bytes())
	if _, ok := h["Content-Length"]; ok {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.ResponseWriter.WriteHeader(w.status)
	if len(body) > 0 {
		w.ResponseWriter.Write(body)
	}
}
