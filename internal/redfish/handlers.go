package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
)

// resolve finds the machine a scoped route names and checks that the caller
// may reach it. A caller limited to some systems gets 401 for every other id,
// existing or not: to it the others are separate BMCs that do not know its
// credentials, and it learns nothing about which exist.
func (s *Server) resolve(c *call, rt *route) *apiError {
	m, err := s.svc.Get(c.params[0])
	if err != nil && !errors.Is(err, machine.ErrNotFound) {
		return s.modelError(c, err)
	}
	if m != nil && c.who.canAccess(m) {
		c.m = m
		return nil
	}
	if !c.who.all && c.bmc == "" {
		return unauthorized("The credentials are not valid for this system.")
	}
	kind := map[scope]string{scopeSystem: "ComputerSystem", scopeManager: "Manager", scopeChassis: "Chassis"}[rt.scope]
	return newError(http.StatusNotFound, MsgResourceNotFound, kind, c.params[0])
}

// serveCached serves a GET from the render cache.
func serveCached(s *Server, c *call) *apiError {
	e, err := s.current(c)
	if err != nil {
		return err
	}
	h := c.w.Header()
	if inm := c.r.Header["If-None-Match"]; len(inm) > 0 && etagListed(inm[0], e.etag) {
		h["Etag"] = e.hETag
		c.w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if vw, ok := c.w.(*idWriter); ok {
		vw.mapped() // the cache holds the view's own rendering
	}
	e.write(c.w, http.StatusOK)
	return nil
}

// current returns the rendering of the resource c names, from the cache when
// the machine has not changed since it was rendered.
func (s *Server) current(c *call) (*entry, *apiError) {
	var gen uint64
	if c.m != nil {
		gen = c.m.Generation
	}
	volatile := s.volatile(c)
	key := c.path
	if c.view != nil {
		key = c.view.key + c.path
	}
	if e := s.cache.get(key, gen); e != nil && !volatile {
		return e, nil
	}
	v := c.rt.render(s, c)
	var e *entry
	switch v := v.(type) {
	case nil:
		return nil, notFound(c)
	case *entry:
		e = v
	case obj:
		if v == nil {
			return nil, notFound(c)
		}
		e = renderJSON(gen, v)
	default:
		e = renderJSON(gen, v)
	}
	if c.view != nil {
		mapped := newEntry(gen, c.view.mapOut(c, e.body), e.hType)
		mapped.hLink = e.hLink
		e = mapped
	}
	s.cache.put(key, e)
	return e, nil
}

func notFound(c *call) *apiError {
	p := c.path
	kind := "Resource"
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if c.rt != nil && len(c.rt.segs) >= 2 {
		kind = c.rt.segs[len(c.rt.segs)-2]
	}
	return newError(http.StatusNotFound, MsgResourceNotFound, kind, p)
}

func etagListed(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// writeJSON renders v and writes it with its ETag.
func (s *Server) writeJSON(c *call, status int, v any) {
	renderJSON(0, v).write(c.w, status)
}

// fail writes a Redfish error response. Failures of the service itself (5xx)
// are logged; the client's mistakes are not.
func (s *Server) fail(c *call, e *apiError) {
	h := c.w.Header()
	for _, kv := range e.header {
		h.Set(kv[0], kv[1])
	}
	delete(h, "Etag")
	if e.status >= 500 && e.status != http.StatusServiceUnavailable {
		// 503s are refusals for room or injected faults, counted and
		// logged (rate-limited) where they are decided.
		s.log.Error("request failed", zap.String("method", c.r.Method), zap.String("path", c.r.URL.Path),
			zap.Int("status", e.status), zap.String("error", e.Error()), zap.String("detail", e.detail))
	}
	b, _ := json.Marshal(errorBody(e))
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	if e.status == http.StatusRequestEntityTooLarge {
		discardBody(c)
	}
	c.w.WriteHeader(e.status)
	c.w.Write(b)
	if e.status == http.StatusRequestEntityTooLarge && c.r.ProtoMajor == 2 {
		// The stream is reset once the handler returns with its body
		// unread, and HTTP/2's scheduler sends that reset ahead of
		// queued data: curl then saw the 413 cut short. Flushing
		// writes the answer out first.
		_ = http.NewResponseController(c.w).Flush()
	}
}

// modelError translates an error of the machine model into a response.
func (s *Server) modelError(c *call, err error) *apiError {
	var be *machine.BIOSError
	var busy *machine.BusyError
	switch {
	case errors.As(err, &be):
		return biosError(be)
	case errors.Is(err, machine.ErrNotFound):
		return notFound(c)
	case errors.As(err, &busy):
		secs := strconv.Itoa(max(1, int((busy.RetryAfter+time.Second-1)/time.Second)))
		return newError(http.StatusConflict, MsgResourceInUse).with(err.Error()).withHeader("Retry-After", secs)
	case errors.Is(err, machine.ErrConflict):
		return newError(http.StatusConflict, MsgResourceInUse).with(err.Error())
	case errors.Is(err, machine.ErrInvalid), errors.Is(err, machine.ErrUnsupported):
		e := newError(http.StatusBadRequest, MsgGeneralError).with(err.Error())
		e.messages[0].Resolution = "Correct the request and resubmit it: " + err.Error()
		return e
	case errors.Is(err, machine.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return newError(http.StatusServiceUnavailable, MsgServiceTemporarilyUnavailable, "5").
			with(err.Error()).withHeader("Retry-After", "5")
	}
	return newError(http.StatusInternalServerError, MsgInternalError).with(err.Error())
}

func biosError(be *machine.BIOSError) *apiError {
	v := argText(be.Value)
	switch be.Reason {
	case "unknown":
		return newError(http.StatusBadRequest, MsgPropertyUnknown, be.Attribute)
	case "type":
		return newError(http.StatusBadRequest, MsgPropertyValueTypeError, v, be.Attribute)
	case "readonly":
		return newError(http.StatusBadRequest, MsgPropertyNotWritable, be.Attribute)
	case "conflict":
		return newError(http.StatusBadRequest, MsgPropertyValueConflict, be.Attribute, machine.BIOSBootMode).with(be.Error())
	case "uefi-only":
		return newError(http.StatusBadRequest, MsgPropertyValueNotInList, v, be.Attribute).with(be.Error())
	}
	if _, isNum := be.Value.(float64); isNum {
		return newError(http.StatusBadRequest, MsgPropertyValueOutOfRange, v, be.Attribute)
	}
	if _, isNum := be.Value.(int); isNum {
		return newError(http.StatusBadRequest, MsgPropertyValueOutOfRange, v, be.Attribute)
	}
	return newError(http.StatusBadRequest, MsgPropertyValueNotInList, v, be.Attribute)
}

// ctx is the context of a change: it outlives the client's connection, so a
// power action that began is carried through.
func ctx(c *call) context.Context { return context.WithoutCancel(c.r.Context()) }

// changed answers an action or a DELETE the model carried out: 204 No
// Content and the change logged (logChange) when err is nil, else the model's
// error (modelError).
func (s *Server) changed(c *call, err error, what string, fields ...zap.Field) *apiError {
	if err != nil {
		return s.modelError(c, err)
	}
	s.logChange(c, what, fields...)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) logChange(c *call, what string, fields ...zap.Field) {
	fs := append([]zap.Field{zap.String("user", c.who.user), zap.String("path", c.path)}, fields...)
	if c.m != nil {
		fs = append(fs, zap.String("machine", c.m.Name))
	}
	s.log.Info(what, fs...)
}

// --- static and versioned documents ---

func getVersions(s *Server, c *call) *apiError {
	s.writeJSON(c, http.StatusOK, obj{"v1": rootURI + "/"})
	return nil
}

func renderStatic(build func(*Server) any) renderFunc {
	return func(s *Server, _ *call) any { return build(s) }
}

func renderMetadata(*Server, *call) any { return newEntry(0, []byte(metadataXML()), hdrXML) }

// --- systems, managers, chassis ---

// visible lists the machines c.who may reach.
func (s *Server) visible(c *call) []*machine.Machine {
	if c.who.only != "" {
		// A server's own BMC: its one system, without a snapshot of
		// every other machine.
		if m, err := s.svc.Get(c.who.only); err == nil && c.who.canAccess(m) {
			return []*machine.Machine{m}
		}
		return nil
	}
	ms := s.svc.List()
	if c.who.all {
		return ms
	}
	out := ms[:0:0]
	for _, m := range ms {
		if c.who.canAccess(m) {
			out = append(out, m)
		}
	}
	return out
}

// members returns the IDs of at most limit machines c.who may reach, from
// the skip-th on, and how many it may reach in all. A caller who may reach
// every machine is answered without a snapshot of each.
func (s *Server) members(c *call, skip, limit int) (ids []string, total int) {
	if c.who.everywhere() {
		return s.svc.IDs(skip, limit)
	}
	all := s.visible(c)
	return machine.PageIDs(all, skip, limit), len(all)
}

// pageSize is the most members one page of a big collection lists; a
// longer one ends with Members@odata.nextLink (DSP0266 §7.4.2, server-driven
// paging), so 100,000 systems are never one 7 MB body.
const pageSize = 1000

// page reads $skip and $top (DSP0266 §7.4.2, client-driven paging).
func page(c *call) (skip, top int, aerr *apiError) {
	top = -1
	q := c.r.URL.Query()
	for _, p := range []struct {
		name string
		v    *int
	}{{"$skip", &skip}, {"$top", &top}} {
		vs, ok := q[p.name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 0 || len(vs) > 1 {
			return 0, 0, newError(http.StatusBadRequest, MsgQueryParameterValueTypeError, strings.Join(vs, ","), p.name).
				with("Give " + p.name + " once, as a non-negative integer.")
		}
		*p.v = n
	}
	return skip, top, nil
}

// writeCollection writes a collection of machine-level members by hand:
// with a thousand systems this is the hot path of an inventory scan. Pages
// follow the backend's order, which is stable.
func (s *Server) writeCollection(c *call, uri, odataType, name string) *apiError {
	skip, top, aerr := page(c)
	if aerr != nil {
		return aerr
	}
	limit := pageSize + 1 // one more tells whether a next page follows
	if top >= 0 && top < limit {
		limit = top
	}
	ms, total := s.members(c, skip, limit)
	next := ""
	if len(ms) > pageSize {
		ms = ms[:pageSize]
		next = uri + "?$skip=" + strconv.Itoa(skip+pageSize)
		if top >= 0 {
			next += "&$top=" + strconv.Itoa(top-pageSize)
		}
	}
	b := make([]byte, 0, 256+len(ms)*(len(uri)+56))
	b = append(b, `{"@odata.id":"`...)
	b = append(b, uri...)
	b = append(b, `","@odata.type":"#`...)
	b = append(b, odataType...)
	b = append(b, '.')
	b = append(b, odataType...)
	b = append(b, `","Members":[`...)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"@odata.id":"`...)
		b = append(b, uri...)
		b = append(b, '/')
		b = append(b, m...) // a UUID: nothing to escape
		b = append(b, `"}`...)
	}
	// The count is the whole collection's, whatever the page shows.
	b = append(b, `],"Members@odata.count":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	if next != "" {
		b = append(b, `,"Members@odata.nextLink":"`...)
		b = append(b, next...)
		b = append(b, '"')
	}
	b = append(b, `,"Name":`...)
	nb, _ := json.Marshal(name)
	b = append(b, nb...)
	b = append(b, '}')
	e := newEntry(0, b, hdrJSON)
	e.hLink = schemaLink(odataType)
	e.write(c.w, http.StatusOK)
	return nil
}

func getSystems(s *Server, c *call) *apiError {
	return s.writeCollection(c, systemsURI, "ComputerSystemCollection", "Computer System Collection")
}

func getManagers(s *Server, c *call) *apiError {
	return s.writeCollection(c, managersURI, "ManagerCollection", "Manager Collection")
}

func getChassisCollection(s *Server, c *call) *apiError {
	return s.writeCollection(c, chassisURI, "ChassisCollection", "Chassis Collection")
}

func renderSystem(s *Server, c *call) any {
	id := s.idOf(c.m)
	if id.P.HPEOEM {
		id.InPost = s.inPost(c.m)
	}
	return system(c.m, id)
}

// getManager is not cached: its DateTime is the BMC's clock, now.
func getManager(s *Server, c *call) *apiError {
	s.writeManager(c, http.StatusOK)
	return nil
}
func renderChassis(s *Server, c *call) any { return chassis(c.m, s.idOf(c.m)) }

func subCollection(c *call, odataType, name string, members []string) any {
	return collection(c.path, odataType, name, ids(c.path, members))
}

func renderProcessors(_ *Server, c *call) any {
	return subCollection(c, "ProcessorCollection", "Processors Collection", processorIDs(c.m))
}
func renderProcessor(_ *Server, c *call) any { return processor(c.m, c.params[1]) }
func renderMemories(_ *Server, c *call) any {
	return subCollection(c, "MemoryCollection", "Memory Collection", memoryIDs(c.m))
}
func renderMemory(_ *Server, c *call) any { return memory(c.m, c.params[1]) }
func renderNICs(_ *Server, c *call) any {
	return subCollection(c, "EthernetInterfaceCollection", "Ethernet Interface Collection", nicIDs(c.m))
}
func renderNIC(_ *Server, c *call) any { return ethernetInterface(c.m, c.params[1]) }
func renderSimpleStorages(_ *Server, c *call) any {
	return subCollection(c, "SimpleStorageCollection", "Simple Storage Collection", []string{storageID})
}
func renderSimpleStorage(_ *Server, c *call) any { return simpleStorage(c.m, c.params[1]) }
func renderStorages(_ *Server, c *call) any {
	return subCollection(c, "StorageCollection", "Storage Collection", []string{storageID})
}
func renderStorage(_ *Server, c *call) any {
	return storage(c.m, c.params[1])
}
func renderStorageControllers(_ *Server, c *call) any {
	if c.params[1] != storageID {
		return nil
	}
	return subCollection(c, "StorageControllerCollection", "Storage Controller Collection", []string{storageControllerID})
}
func renderStorageController(_ *Server, c *call) any {
	return storageController(c.m, c.params[1], c.params[2])
}

func renderDrive(_ *Server, c *call) any {
	did, err := url.PathUnescape(c.params[2])
	if err != nil {
		return nil
	}
	return drive(c.m, c.params[1], did)
}
func renderSecureBoot(s *Server, c *call) any   { return secureBoot(c.m, s.hasKeys(c.m.ID)) }
func renderBios(_ *Server, c *call) any         { return bios(c.m) }
func renderBiosSettings(_ *Server, c *call) any { return biosSettings(c.m) }

// --- changes ---

// ifMatch checks a request's If-Match header against the resource's
// current ETag (RFC 7232 §3.1; DSP0266 §7.10, atomic changes).
func ifMatch(c *call, etag string) *apiError {
	if im := c.r.Header["If-Match"]; len(im) > 0 && !etagListed(im[0], etag) {
		return newError(http.StatusPreconditionFailed, MsgPreconditionFailed)
	}
	return nil
}

// begin reads and checks the body of a PATCH: If-Match against the current
// ETag, then the properties against schema and the current rendering.
func (s *Server) begin(c *call, schema fields) (map[string]any, *apiError) {
	cur, err := s.current(c)
	if err != nil {
		return nil, err
	}
	if err := ifMatch(c, cur.etag); err != nil {
		return nil, err
	}
	body, err := readObject(c)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, newError(http.StatusBadRequest, MsgEmptyJSON)
	}
	var rendered map[string]any
	_ = json.Unmarshal(cur.body, &rendered)
	if msgs := schema.check(body, rendered); len(msgs) > 0 {
		return nil, &apiError{status: http.StatusBadRequest, messages: msgs}
	}
	if err := schema.noChange(body); err != nil {
		return nil, err
	}
	return body, nil
}

// respondChanged answers a successful PATCH with the new representation.
func (s *Server) respondChanged(c *call) *apiError {
	m, err := s.svc.Get(c.m.ID)
	if err != nil {
		return s.modelError(c, err)
	}
	c.m = m
	return serveCached(s, c)
}

var systemSchema = fields{
	"Boot": {sub: fields{
		"BootSourceOverrideTarget":  {enum: strs(machine.BootSources)},
		"BootSourceOverrideEnabled": {enum: strs(machine.BootEnabledValues)},
		"BootSourceOverrideMode":    {enum: strs(machine.BootModes)},
		"HttpBootUri":               {},
		"BootOrder":                 {kind: kindArray},
		"BootNext":                  {},
	}},
	"IndicatorLED":            {enum: []string{"Lit", "Blinking", "Off"}},
	"LocationIndicatorActive": {kind: kindBool},
}

func patchSystem(s *Server, c *call) *apiError {
	body, aerr := s.begin(c, systemSchema)
	if aerr != nil {
		return aerr
	}
	led, hasLED := body["IndicatorLED"].(string)
	lia, hasLIA := body["LocationIndicatorActive"].(bool)
	if hasLED && hasLIA && (led != "Off") != lia {
		return newError(http.StatusBadRequest, MsgPropertyValueConflict, "IndicatorLED", "LocationIndicatorActive")
	}
	if boot, ok := body["Boot"].(map[string]any); ok {
		var p machine.BootPatch
		if v, ok := boot["BootSourceOverrideTarget"].(string); ok {
			t := machine.BootSource(v)
			p.Target = &t
		}
		if v, ok := boot["BootSourceOverrideEnabled"].(string); ok {
			e := machine.BootEnabled(v)
			p.Enabled = &e
		}
		if v, ok := boot["BootSourceOverrideMode"].(string); ok {
			md := machine.BootMode(v)
			p.Mode = &md
		}
		if v, ok := boot["HttpBootUri"].(string); ok {
			p.HTTPBootURI = &v
		}
		if v, ok := boot["BootNext"].(string); ok {
			p.BootNext = &v
		}
		if aerr := s.patchBootOrder(c, boot); aerr != nil {
			return aerr
		}
		if _, err := s.svc.SetBoot(ctx(c), c.m.ID, p); err != nil {
			if aerr := bootNextError(err, p); aerr != nil {
				return aerr
			}
			switch {
			case errors.Is(err, machine.ErrHTTPBootLegacy):
				return newError(http.StatusConflict, MsgPropertyValueConflict, "BootSourceOverrideTarget", "BootSourceOverrideMode").with(err.Error())
			case errors.Is(err, machine.ErrConflict) && p.Mode != nil:
				return newError(http.StatusConflict, MsgPropertyValueConflict, "BootSourceOverrideMode", "SecureBootEnable").with(err.Error())
			case errors.Is(err, machine.ErrNoHTTPBootURI):
				return newError(http.StatusBadRequest, MsgPropertyMissing, "HttpBootUri").with(err.Error())
			case errors.Is(err, machine.ErrBadHTTPBootURI):
				return newError(http.StatusBadRequest, MsgPropertyValueFormatError, *p.HTTPBootURI, "HttpBootUri").with(err.Error())
			}
			return s.modelError(c, err)
		}
		s.logChange(c, "boot override changed", zap.Any("boot", boot))
	}
	if hasLED || hasLIA {
		on := lia
		if hasLED {
			on = led != "Off"
		}
		if err := s.svc.SetIndicator(c.m.ID, on); err != nil {
			return s.modelError(c, err)
		}
	}
	return s.respondChanged(c)
}

var secureBootSchema = fields{"SecureBootEnable": {kind: kindBool}}

func patchSecureBoot(s *Server, c *call) *apiError {
	body, aerr := s.begin(c, secureBootSchema)
	if aerr != nil {
		return aerr
	}
	if on, ok := body["SecureBootEnable"].(bool); ok {
		if _, err := s.svc.SetSecureBoot(ctx(c), c.m.ID, on); err != nil {
			if errors.Is(err, machine.ErrConflict) {
				return newError(http.StatusConflict, MsgPropertyValueConflict, "SecureBootEnable", "BootSourceOverrideMode").with(err.Error())
			}
			return s.modelError(c, err)
		}
		s.logChange(c, "secure boot changed", zap.Bool("enable", on))
	}
	return s.respondChanged(c)
}

var biosSettingsSchema = fields{
	"Attributes": {kind: kindObject},
	"@Redfish.SettingsApplyTime": {sub: fields{
		"ApplyTime": {enum: []string{"OnReset"}},
	}},
}

func patchBiosSettings(s *Server, c *call) *apiError {
	body, aerr := s.begin(c, biosSettingsSchema)
	if aerr != nil {
		return aerr
	}
	if attrs, ok := body["Attributes"].(map[string]any); ok && len(attrs) > 0 {
		if _, err := s.svc.SetBIOSPending(ctx(c), c.m.ID, attrs); err != nil {
			return s.modelError(c, err)
		}
		s.logChange(c, "BIOS settings staged", zap.Int("attributes", len(attrs)))
	}
	return s.respondChanged(c)
}

// --- actions ---

// actionParams reads an action's body: an object whose keys are among
// allowed. An empty body is an empty object.
func actionParams(c *call, action string, allowed ...string) (map[string]any, *apiError) {
	body, dup, err := parseCall(c)
	switch {
	case dup != nil && len(dup.keys) == 1:
		return nil, newError(http.StatusBadRequest, MsgActionParameterDuplicate, action, dup.path())
	case dup != nil:
		return nil, newError(http.StatusBadRequest, MsgPropertyDuplicate, dup.path())
	case err != nil:
		return nil, err
	}
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) && !strings.HasPrefix(k, "@") {
			return nil, newError(http.StatusBadRequest, MsgActionParameterUnknown, action, k)
		}
	}
	return body, nil
}

// enumParam reads a required string parameter that must be one of values.
func enumParam(body map[string]any, action, name string, values []string) (string, *apiError) {
	v, ok := body[name]
	if !ok {
		return "", newError(http.StatusBadRequest, MsgActionParameterMissing, action, name)
	}
	str, ok := v.(string)
	if !ok {
		return "", newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(v), name, action)
	}
	if !slices.Contains(values, str) {
		return "", newError(http.StatusBadRequest, MsgActionParameterValueNotInList, argText(str), name, action)
	}
	return str, nil
}

// actionEnum reads the body of an action whose one parameter, name, is
// required and one of values.
func actionEnum(c *call, action, name string, values []string) (string, *apiError) {
	body, aerr := actionParams(c, action, name)
	if aerr != nil {
		return "", aerr
	}
	return enumParam(body, action, name, values)
}

// optionalEnum is enumParam for a parameter the action may go without:
// def when body does not name it.
func optionalEnum(body map[string]any, action, name, def string, values []string) (string, *apiError) {
	if _, ok := body[name]; !ok {
		return def, nil
	}
	return enumParam(body, action, name, values)
}

// managerResetTypes are the BMC resets a Manager takes; both start the BMC
// over (machine.ResetBMC), and the machine it manages keeps running.
var managerResetTypes = []string{"GracefulRestart", "ForceRestart"}

func postManagerReset(s *Server, c *call) *apiError {
	const action = "Manager.Reset"
	body, aerr := actionParams(c, action, "ResetType")
	if aerr != nil {
		return aerr
	}
	// The schema lets a service choose when none is given.
	rt, aerr := optionalEnum(body, action, "ResetType", managerResetTypes[0], managerResetTypes)
	if aerr != nil {
		return aerr
	}
	return s.changed(c, s.svc.ResetBMC(c.m.ID), "BMC reset", zap.String("type", rt))
}

func postReset(s *Server, c *call) *apiError {
	const action = "ComputerSystem.Reset"
	rt, aerr := actionEnum(c, action, "ResetType", strs(machine.ResetTypes))
	if aerr != nil {
		return aerr
	}
	if aerr := s.beforeReset(c, machine.ResetType(rt)); aerr != nil {
		return aerr
	}
	if err := s.svc.Reset(ctx(c), c.m.ID, machine.ResetType(rt)); err != nil {
		if _, ok := machine.IsMediaError(err); ok {
			// A UefiHttp boot's image could not be fetched.
			return s.mediaModelError(c, err, "", "HttpBootUri")
		}
		return s.modelError(c, err)
	}
	s.afterReset(c, machine.ResetType(rt))
	s.logChange(c, "reset", zap.String("type", rt))
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func postResetBios(s *Server, c *call) *apiError {
	if _, aerr := actionParams(c, "Bios.ResetBios"); aerr != nil {
		return aerr
	}
	return s.changed(c, s.svc.ResetBIOS(ctx(c), c.m.ID), "BIOS defaults staged")
}

// --- sessions and accounts ---

// readLogin reads a session login: at most maxLoginBody bytes, of which
// only UserName and Password are looked at. Nothing else of an
// unauthenticated body is checked or echoed (a login of 80,000 unknown
// keys was answered with a message for each).
func readLogin(c *call) (user, pass string, aerr *apiError) {
	body, aerr := readObjectLimit(c.r, maxLoginBody)
	if aerr != nil {
		return "", "", aerr
	}
	var vals [2]string
	for i, k := range []string{"UserName", "Password"} {
		v, ok := body[k]
		if !ok {
			return "", "", newError(http.StatusBadRequest, MsgPropertyMissing, k)
		}
		s, ok := v.(string)
		if !ok {
			shown := argText(v)
			if k == "Password" {
				shown = "(hidden)"
			}
			return "", "", newError(http.StatusBadRequest, MsgPropertyValueTypeError, shown, k)
		}
		vals[i] = s
	}
	return vals[0], vals[1], nil
}

func postSession(s *Server, c *call) *apiError {
	user, pass, err := readLogin(c)
	if err != nil {
		return err
	}
	if err := s.slowed(c); err != nil {
		return err
	}
	who, why := s.verify(c.bmc, user, pass, c.r.RemoteAddr)
	if who == nil {
		s.refused(c, user, why)
		return refusal(why)
	}
	if err := s.admit(c, who); err != nil {
		return err
	}
	who = c.who
	sess := s.sessions.create(who, c.bmc, s.now(), s.ttl, s.maxSessions, s.maxPerUser)
	if sess == nil {
		return newError(http.StatusServiceUnavailable, MsgSessionLimitExceeded)
	}
	s.log.Info("session created", zap.String("user", user), zap.String("session", sess.id), zap.String("remote", c.r.RemoteAddr))
	h := c.w.Header()
	h.Set("X-Auth-Token", sess.token)
	h.Set("Location", sessionsURI+"/"+sess.id)
	s.writeJSON(c, http.StatusCreated, sessionResource(sess.id, user))
	return nil
}

func getSessions(s *Server, c *call) *apiError {
	ss := s.sessions.visible(c.who, c.bmc)
	members := make([]string, len(ss))
	for i, sess := range ss {
		members[i] = sessionsURI + "/" + sess.id
	}
	sort.Strings(members)
	s.writeJSON(c, http.StatusOK, collection(sessionsURI, "SessionCollection", "Session Collection", members))
	return nil
}

// ownSession returns the session c.params[0] when c.who may see it.
func (s *Server) ownSession(c *call) (*session, *apiError) {
	sess := s.sessions.get(c.params[0])
	if sess == nil || sess.bmc != c.bmc || !c.who.sees(sess.who.Load()) {
		return nil, newError(http.StatusNotFound, MsgResourceNotFound, "Session", c.params[0])
	}
	return sess, nil
}

func getSession(s *Server, c *call) *apiError {
	sess, err := s.ownSession(c)
	if err != nil {
		return err
	}
	s.writeJSON(c, http.StatusOK, sessionResource(sess.id, sess.who.Load().user))
	return nil
}

func deleteSession(s *Server, c *call) *apiError {
	sess, err := s.ownSession(c)
	if err != nil {
		return err
	}
	s.sessions.remove(sess)
	s.log.Info("session deleted", zap.String("user", c.who.user), zap.String("session", sess.id))
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
