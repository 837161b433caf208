package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
)

// Event log and live updates.
//
// The hub derives a short log per machine from the model's events (power
// changed, a Once override used, media inserted or ejected, a power action
// failed, the host lost or back), as the Redfish EventService does, and
// tells every live view which machines changed. A view is sent the rows of
// the machines that changed since its last batch, at most every
// flushEvery: a thousand machines powered on at once make a few batches,
// not a thousand messages, and a slow browser holds a set of IDs, not a
// queue of events.

const (
	logPerMachine = 32   // entries kept per machine
	logMachines   = 4096 // machines with a log; the oldest log goes first
	flushEvery    = 200 * time.Millisecond
	recheckEvery  = 500 * time.Millisecond // a machine in PoweringOn or PoweringOff
	pingEvery     = 25 * time.Second
)

type entry struct {
	Time     string
	Severity string // OK, Warning, Critical
	Message  string
}

type hub struct {
	mu      sync.Mutex
	prev    map[string]*machine.Machine
	logs    map[string][]entry
	order   []string // machines in the order their log was made
	clients map[*viewer]struct{}
}

// viewer is one live view: the machines that changed since its last batch.
type viewer struct {
	mu    sync.Mutex
	dirty map[string]struct{}
	kick  chan struct{}
}

func (h *hub) init() {
	h.prev = map[string]*machine.Machine{}
	h.logs = map[string][]entry{}
	h.clients = map[*viewer]struct{}{}
}

func (h *hub) add() *viewer {
	v := &viewer{dirty: map[string]struct{}{}, kick: make(chan struct{}, 1)}
	h.mu.Lock()
	h.clients[v] = struct{}{}
	h.mu.Unlock()
	return v
}

func (h *hub) remove(v *viewer) {
	h.mu.Lock()
	delete(h.clients, v)
	h.mu.Unlock()
}

// mark adds machines to the viewer's changed set.
func (v *viewer) mark(ids []string) {
	v.mu.Lock()
	for _, id := range ids {
		v.dirty[id] = struct{}{}
	}
	v.mu.Unlock()
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// take returns the machines that changed since the last call.
func (v *viewer) take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	ids := make([]string, 0, len(v.dirty))
	for id := range v.dirty {
		ids = append(ids, id)
	}
	clear(v.dirty)
	return ids
}

// log returns a machine's log, newest first.
func (h *hub) log(id string) []entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.logs[id]
	out := make([]entry, len(l))
	for i, e := range l {
		out[len(l)-1-i] = e
	}
	return out
}

// last returns a machine's newest log entry.
func (h *hub) last(id string) *entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.logs[id]; len(l) > 0 {
		e := l[len(l)-1]
		return &e
	}
	return nil
}

func (h *hub) event(ev machine.Event, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.Kind == machine.EventRemoved {
		delete(h.prev, ev.ID)
	} else if m := ev.Machine; m != nil {
		old := h.prev[m.ID]
		if old == nil {
			old = ev.Prev
		}
		h.prev[m.ID] = m
		if old != nil {
			for _, e := range changes(old, m) {
				e.Time = now.UTC().Format(time.RFC3339)
				h.append(m.ID, e)
			}
		}
	}
	id := ev.ID
	if id == "" && ev.Machine != nil {
		id = ev.Machine.ID
	}
	for v := range h.clients {
		v.mu.Lock()
		v.dirty[id] = struct{}{}
		v.mu.Unlock()
		select {
		case v.kick <- struct{}{}:
		default:
		}
	}
}

// append adds e to a machine's log; h.mu is held.
func (h *hub) append(id string, e entry) {
	l, ok := h.logs[id]
	if !ok {
		if len(h.order) >= logMachines {
			delete(h.logs, h.order[0])
			h.order = h.order[1:]
		}
		h.order = append(h.order, id)
	}
	l = append(l, e)
	if len(l) > logPerMachine {
		l = l[len(l)-logPerMachine:]
	}
	h.logs[id] = l
}

// changes says in words what changed between two snapshots of a machine.
func changes(old, m *machine.Machine) []entry {
	var out []entry
	if old.Power != m.Power {
		out = append(out, entry{Severity: "OK", Message: fmt.Sprintf("Power %s → %s", old.Power, m.Power)})
	}
	if old.Settings.Boot.Enabled == machine.BootOnce && m.Settings.Boot.Enabled == machine.BootDisabled {
		out = append(out, entry{Severity: "OK", Message: fmt.Sprintf("One-time boot override (%s) used", old.Settings.Boot.Target)})
	} else if old.Settings.Boot != m.Settings.Boot {
		b := m.Settings.Boot
		out = append(out, entry{Severity: "OK", Message: fmt.Sprintf("Boot override set: %s, %s, %s", b.Target, b.Enabled, b.Mode)})
	}
	for _, nm := range m.Settings.Media {
		was := ""
		for _, om := range old.Settings.Media {
			if om.Slot == nm.Slot {
				was = om.Path
			}
		}
		switch {
		case was == "" && nm.Path != "":
			out = append(out, entry{Severity: "OK", Message: fmt.Sprintf("Virtual media %s inserted: %s", nm.Slot, nm.Image)})
		case was != "" && nm.Path == "":
			out = append(out, entry{Severity: "OK", Message: fmt.Sprintf("Virtual media %s ejected", nm.Slot)})
		}
	}
	if m.PowerFault != "" && m.PowerFault != old.PowerFault {
		out = append(out, entry{Severity: "Critical", Message: "Power action failed: " + m.PowerFault})
	}
	if !maps.Equal(old.Settings.BIOSPending, m.Settings.BIOSPending) && len(m.Settings.BIOSPending) > 0 {
		out = append(out, entry{Severity: "OK", Message: fmt.Sprintf("BIOS settings pending (%d) until the next reset", len(m.Settings.BIOSPending))})
	}
	switch {
	case m.Unavailable != "" && old.Unavailable == "":
		out = append(out, entry{Severity: "Warning", Message: "Host unreachable: " + m.Unavailable})
	case m.Unavailable == "" && old.Unavailable != "":
		out = append(out, entry{Severity: "OK", Message: "Host reachable again"})
	}
	return out
}

// row is what the systems page shows of one machine.
type row struct {
	ID       string `json:"Id"`
	Name     string
	Host     string `json:",omitempty"`
	Removed  bool   `json:",omitempty"`
	Power    string
	Health   string // OK, Warning, Critical
	Problem  string `json:",omitempty"`
	Boot     machine.Boot
	Media    []mediaRow
	Firmware map[machine.FirmwareComponent]string
	Pending  map[machine.FirmwareComponent]string `json:",omitempty"`
	Last     *entry                               `json:",omitempty"`
}

type mediaRow struct {
	Slot     machine.MediaSlot
	Inserted bool
	Image    string `json:",omitempty"`
	Task     string `json:",omitempty"` // the state of an insert in progress or failed
}

// row builds the row of m, health as the Redfish System's Status says it.
func (u *UI) row(m *machine.Machine) row {
	r := row{
		ID: m.ID, Name: m.Name, Host: m.Host, Power: string(m.Power), Health: "OK",
		Boot:     m.Settings.Boot,
		Firmware: map[machine.FirmwareComponent]string{},
		Pending:  m.Settings.FirmwarePending,
		Last:     u.hub.last(m.ID),
	}
	for _, c := range []machine.FirmwareComponent{machine.FirmwareBIOS, machine.FirmwareBMC, machine.FirmwareNIC} {
		r.Firmware[c] = m.Settings.FirmwareVersion(c)
	}
	switch {
	case m.PowerFault != "":
		r.Health, r.Problem = "Critical", "The last power action failed: "+m.PowerFault
	case m.Unavailable != "":
		r.Health, r.Problem = "Warning", m.Unavailable
	}
	if _, media, err := u.svc.Media(m.ID); err == nil {
		for _, md := range media {
			mr := mediaRow{Slot: md.Slot, Inserted: md.Inserted, Image: md.Image}
			if md.Task != nil {
				if st := md.Task.Status(); st.State != machine.TaskCompleted {
					mr.Task = string(st.State)
				}
			}
			r.Media = append(r.Media, mr)
		}
	}
	return r
}

type page struct {
	Total int
	Skip  int
	Rows  []row
}

// serveSystems answers one page of the systems the caller may see:
// ?skip=N&top=M (at most pageMax), &q= keeps those whose name or ID holds
// it. The service-wide user's unfiltered pages cost no snapshot of the
// machines off the page.
func (u *UI) serveSystems(w http.ResponseWriter, r *http.Request, c redfish.Caller) {
	q := r.URL.Query()
	skip, err1 := atoiDefault(q.Get("skip"), 0)
	top, err2 := atoiDefault(q.Get("top"), 50)
	if err := errors.Join(err1, err2); err != nil || skip < 0 || top < 1 || top > pageMax {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("skip and top: want 0 ≤ skip and 1 ≤ top ≤ %d", pageMax))
		return
	}
	filter := strings.ToLower(q.Get("q"))
	if len(filter) > 128 {
		apiError(w, http.StatusBadRequest, "q: at most 128 characters")
		return
	}
	p := page{Skip: skip, Rows: []row{}}
	if c.AllSystems() && filter == "" {
		var ids []string
		ids, p.Total = u.svc.IDs(skip, top)
		for _, id := range ids {
			if m, err := u.svc.Get(id); err == nil {
				p.Rows = append(p.Rows, u.row(m))
			}
		}
		writeJSON(w, p)
		return
	}
	for _, m := range u.svc.List() {
		if !c.CanAccess(m) || (filter != "" && !strings.Contains(strings.ToLower(m.Name), filter) && !strings.Contains(m.ID, filter)) {
			continue
		}
		if p.Total >= skip && len(p.Rows) < top {
			p.Rows = append(p.Rows, u.row(m))
		}
		p.Total++
	}
	writeJSON(w, p)
}

func atoiDefault(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

// serveLive streams Server-Sent Events to caller c: "rows", a JSON array of
// the rows of the machines the caller may see that changed (a removed one
// with Removed set), and a comment every pingEvery. The stream holds a
// slot (slots.go) and is held to its session: it ends as soon as the
// session does (logout, deletion, expiry, its account deleted or
// disabled), and never marks the session used.
func (u *UI) serveLive(w http.ResponseWriter, r *http.Request, c redfish.Caller) {
	release, why := u.slots.take(c.Key(), r.RemoteAddr)
	if why != "" {
		w.Header().Set("Retry-After", "5")
		apiError(w, http.StatusServiceUnavailable, why)
		return
	}
	defer release()
	rc := http.NewResponseController(w)
	// The listener's timeouts bound ordinary requests; a stream lives as
	// long as the page (with the write deadline left, the stream broke
	// at the first write after it: TestLiveOutlivesTimeouts).
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	admission.Unbounded(r) // and the listener's own, per request
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	changes := u.watch(ctx, r.Header.Get("X-Auth-Token"), c, func(redfish.Caller) bool { return true })
	v := u.hub.add()
	defer u.hub.remove(v)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(": live\n\n"))
	if rc.Flush() != nil {
		return
	}
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.done:
			return
		case now, ok := <-changes:
			if !ok {
				return // the session is over
			}
			c = now
			continue
		case <-ping.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil || rc.Flush() != nil {
				return
			}
			continue
		case <-v.kick:
		}
		if wait := flushEvery - time.Since(last); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			case <-u.done:
				return
			}
		}
		last = time.Now()
		select {
		case now, ok := <-changes:
			if !ok {
				return
			}
			c = now
		default:
		}
		rows := []row{}
		var moving []string
		for _, id := range v.take() {
			m, err := u.svc.Get(id)
			switch {
			case errors.Is(err, machine.ErrNotFound):
				rows = append(rows, row{ID: id, Removed: true})
			case err == nil && c.CanAccess(m):
				rows = append(rows, u.row(m))
				if m.Power == machine.PowerPoweringOn || m.Power == machine.PowerPoweringOff {
					moving = append(moving, m.ID)
				}
			}
		}
		if len(moving) > 0 {
			// PoweringOn and PoweringOff are the model's word for an
			// action under way; the backend's event may come before the
			// action ends, and the end brings no event of its own. Look
			// again until the machine settles.
			time.AfterFunc(recheckEvery, func() { v.mark(moving) })
		}
		if len(rows) == 0 {
			continue
		}
		if err := writeEvent(w, "rows", rows); err != nil || rc.Flush() != nil {
			return
		}
	}
}

func writeEvent(w http.ResponseWriter, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	return err
}
