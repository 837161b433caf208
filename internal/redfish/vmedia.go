package redfish

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/personality/dell"
)

// Virtual media lives under the Manager (where sushy and Ironic look first)
// and under the System (newer clients); both show the same members.

const (
	insertAction = "VirtualMedia.InsertMedia"
	ejectAction  = "VirtualMedia.EjectMedia"
	monitorsURI  = taskServiceURI + "/TaskMonitors"
)

// WithInsertWait sets how long InsertMedia waits for an image before it
// answers 202 with a task (default 1 s): a small or cached image is
// answered 204 (or its error) at once, a large download gets a task.
func WithInsertWait(d time.Duration) Option {
	return func(s *Server) {
		if d >= 0 {
			s.insertWait = d
		}
	}
}

// mediaBase is the resource a virtual media route hangs under.
func mediaBase(c *call) string {
	if c.rt.scope == scopeSystem {
		return systemURI(c.m.ID)
	}
	return managerURI(c.m.ID)
}

// mediaSlot is the member the route names, as c.m's personality lays its
// members out: none when the personality hangs no media where the route
// does.
func (s *Server) mediaSlot(c *call) (personality.Slot, bool) {
	p, _ := s.personaOf(c.m)
	if !p.MediaUnder(c.rt.scope == scopeManager) {
		return personality.Slot{}, false
	}
	return p.Member(c.params[1])
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// virtualMedia builds one member: the model's drive md, shown as the
// personality p names it (sl).
func virtualMedia(base string, md machine.Media, sl personality.Slot, p *personality.Personality) obj {
	u := base + "/VirtualMedia/" + sl.ID
	st := status("Enabled")
	connected := "NotConnected"
	var protocol, method any
	var oem obj
	if md.Inserted {
		connected = "URI"
		method = "Upload"
		protocol = nullable(md.TransferProtocol)
		if d := md.Drive; d != nil && (d.NextStart || d.Volume != "") {
			// KubeVirt: the medium is a DataVolume, and a CD-ROM that
			// does not hot-plug reaches a running VM at its next start.
			at := "Now"
			if d.NextStart {
				connected, at = "NotConnected", "NextStart"
			}
			oem = obj{"Bmlab": obj{"Volume": nullable(d.Volume), "AttachedAt": at}}
		}
	}
	if md.Task != nil {
		ts := md.Task.Status()
		switch ts.State {
		case machine.TaskRunning:
			st = obj{"State": "Starting", "Health": "OK"}
			protocol = nullable(schemeOf(md.Image))
		case machine.TaskException:
			st = obj{"State": "Enabled", "Health": "Warning"}
		}
	}
	o := obj{
		"@odata.id":            u,
		"@odata.type":          "#VirtualMedia.v1_6_0.VirtualMedia",
		"Id":                   sl.ID,
		"Name":                 sl.Name,
		"MediaTypes":           sl.MediaTypes,
		"Image":                nullable(md.Image),
		"ImageName":            nullable(machine.ImageName(md.Image)),
		"Inserted":             md.Inserted,
		"WriteProtected":       true,
		"ConnectedVia":         connected,
		"TransferProtocolType": protocol,
		// Ironic picks the protocol it serves the image with from these.
		"TransferProtocolType@Redfish.AllowableValues": machine.TransferProtocols,
		"TransferMethod":    method,
		"VerifyCertificate": md.VerifyCertificate,
		"UserName":          nullable(md.UserName),
		"Password":          nil,
		"Status":            st,
		"Certificates":      ref{u + "/Certificates"},
		"Actions": obj{
			"#" + insertAction: obj{
				"target": u + "/Actions/" + insertAction,
				"TransferProtocolType@Redfish.AllowableValues": machine.TransferProtocols,
				"TransferMethod@Redfish.AllowableValues":       machine.TransferMethods,
			},
			"#" + ejectAction: obj{"target": u + "/Actions/" + ejectAction},
		},
	}
	if p != nil {
		if vendor := p.MediaOem(u+"/Actions/"+personality.HPEInsertAction, u+"/Actions/"+personality.HPEEjectAction); vendor != nil {
			if oem == nil {
				oem = obj{}
			}
			maps.Copy(oem, vendor)
		}
	}
	if oem != nil {
		o["Oem"] = oem
	}
	return o
}

func schemeOf(image string) string {
	scheme, _, ok := strings.Cut(image, "://")
	if !ok || strings.EqualFold(scheme, "file") {
		return "OEM"
	}
	return strings.ToUpper(scheme)
}

// member reads the machine's media and picks the one the route names,
// with the personality that names it.
func (s *Server) member(c *call) (machine.Media, personality.Slot, *apiError) {
	sl, ok := s.mediaSlot(c)
	if !ok {
		return machine.Media{}, sl, newError(http.StatusNotFound, MsgResourceNotFound, "VirtualMedia", c.params[1])
	}
	_, mds, err := s.svc.Media(c.m.ID)
	if err != nil {
		return machine.Media{}, sl, s.modelError(c, err)
	}
	for _, md := range mds {
		if md.Slot == sl.Drive {
			return md, sl, nil
		}
	}
	return machine.Media{}, sl, newError(http.StatusNotFound, MsgResourceNotFound, "VirtualMedia", c.params[1])
}

// memberBody builds the member md as c.m's personality shows it (and its
// quirks: a stale Inserted).
func (s *Server) memberBody(c *call, md machine.Media, sl personality.Slot) obj {
	p, _ := s.personaOf(c.m)
	return virtualMedia(mediaBase(c), s.staleMedia(c.m, md), sl, p)
}

func getVirtualMediaCollection(s *Server, c *call) *apiError {
	p, _ := s.personaOf(c.m)
	if !p.MediaUnder(c.rt.scope == scopeManager) {
		return newError(http.StatusNotFound, MsgResourceNotFound, "VirtualMediaCollection", c.path)
	}
	base := mediaBase(c)
	members := make([]string, len(p.Media))
	for i, sl := range p.Media {
		members[i] = base + "/VirtualMedia/" + sl.ID
	}
	s.writeJSON(c, http.StatusOK, collection(base+"/VirtualMedia", "VirtualMediaCollection", "Virtual Media Services", members))
	return nil
}

func getVirtualMedia(s *Server, c *call) *apiError {
	md, sl, aerr := s.member(c)
	if aerr != nil {
		return aerr
	}
	body := s.memberBody(c, md, sl)
	e := renderJSON(0, body)
	if inm := c.r.Header["If-None-Match"]; len(inm) > 0 && etagListed(inm[0], e.etag) {
		c.w.Header()["Etag"] = e.hETag
		c.w.WriteHeader(http.StatusNotModified)
		return nil
	}
	s.writeJSON(c, http.StatusOK, body)
	return nil
}

// insertParams are InsertMedia's parameters and the PATCH properties that
// mean the same.
var insertParams = []string{"Image", "Inserted", "WriteProtected", "TransferProtocolType", "TransferMethod", "UserName", "Password"}

// insertRequest reads the parameters from an action body (or a PATCH).
func insertRequest(body map[string]any, action string) (machine.InsertRequest, *apiError) {
	var req machine.InsertRequest
	typeErr := func(k string, v any) *apiError {
		if action == "" {
			return newError(http.StatusBadRequest, MsgPropertyValueTypeError, argText(v), k)
		}
		return newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(v), k, action)
	}
	for _, k := range insertParams {
		v, ok := body[k]
		if !ok {
			continue
		}
		switch k {
		case "Inserted", "WriteProtected":
			b, ok := v.(bool)
			if !ok {
				return req, typeErr(k, v)
			}
			if k == "Inserted" {
				req.Inserted = &b
			} else {
				req.WriteProtected = &b
			}
		default:
			if v == nil && (k == "Image" || k == "UserName" || k == "Password") {
				continue
			}
			str, ok := v.(string)
			if !ok {
				return req, typeErr(k, v)
			}
			switch k {
			case "Image":
				req.Image = str
			case "UserName":
				req.UserName = str
			case "Password":
				req.Password = str
			case "TransferProtocolType", "TransferMethod":
				values, dst := machine.TransferProtocols, &req.TransferProtocol
				if k == "TransferMethod" {
					values, dst = machine.TransferMethods, &req.TransferMethod
				}
				if !slices.Contains(values, str) {
					if action == "" {
						return req, newError(http.StatusBadRequest, MsgPropertyValueNotInList, str, k)
					}
					return req, newError(http.StatusBadRequest, MsgActionParameterValueNotInList, str, k, action)
				}
				*dst = str
			}
		}
	}
	for _, l := range []struct {
		name  string
		v     string
		limit int
	}{{"Image", req.Image, machine.MaxImageURI}, {"UserName", req.UserName, machine.MaxMediaCredential}, {"Password", req.Password, machine.MaxMediaCredential}} {
		if len(l.v) > l.limit {
			return req, tooLong(l.name, l.v, l.limit)
		}
	}
	return req, nil
}

// tooLong refuses a string parameter or property over limit bytes with
// StringValueTooLong, which gives the limit: its start is echoed (nothing
// of a password), and the detail says how long it was (issue 25: a 9 KB
// image URI was answered GeneralError without saying why).
func tooLong(name, v string, limit int) *apiError {
	shown := argText(v)
	if name == "Password" {
		shown = "(hidden)"
	}
	return newError(http.StatusBadRequest, MsgStringValueTooLong, shown, strconv.Itoa(limit)).
		with(fmt.Sprintf("%s is %d bytes long; at most %d are accepted.", name, len(v), limit))
}

func postInsertMedia(s *Server, c *call) *apiError {
	sl, ok := s.mediaSlot(c)
	slot := sl.Drive
	if !ok {
		return newError(http.StatusNotFound, MsgResourceNotFound, "VirtualMedia", c.params[1])
	}
	body, aerr := actionParams(c, insertAction, insertParams...)
	if aerr != nil {
		return aerr
	}
	if img, _ := body["Image"].(string); img == "" {
		if _, present := body["Image"]; present && body["Image"] != nil {
			return newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(body["Image"]), "Image", insertAction)
		}
		return newError(http.StatusBadRequest, MsgActionParameterMissing, insertAction, "Image")
	}
	req, aerr := insertRequest(body, insertAction)
	if aerr != nil {
		return aerr
	}
	if aerr := s.beforeInsert(c, sl); aerr != nil {
		return aerr
	}
	return s.insert(c, slot, req, insertAction)
}

// insert starts an insert and answers: 204 when the image is attached
// within the insert wait, its error when it failed by then, else 202 with
// the task and its monitor.
func (s *Server) insert(c *call, slot machine.MediaSlot, req machine.InsertRequest, action string) *apiError {
	t, err := s.svc.InsertMedia(ctx(c), c.m.ID, slot, req)
	s.afterInsert(c, slot)
	if err != nil {
		return s.mediaModelError(c, err, action, "Image")
	}
	s.logChange(c, "virtual media insert", zap.String("slot", string(slot)), zap.String("image", t.Image), zap.String("task", t.ID))
	timer := time.NewTimer(s.insertWait)
	defer timer.Stop()
	select {
	case <-t.Done():
		st := t.Status()
		switch st.State {
		case machine.TaskCompleted:
			c.w.WriteHeader(http.StatusNoContent)
			return nil
		case machine.TaskException:
			return s.mediaModelError(c, st.Err, action, "Image")
		}
	case <-timer.C:
	}
	c.w.Header().Set("Location", monitorsURI+"/"+t.ID)
	s.writeJSON(c, http.StatusAccepted, task(t))
	return nil
}

func postEjectMedia(s *Server, c *call) *apiError {
	sl, ok := s.mediaSlot(c)
	slot := sl.Drive
	if !ok {
		return newError(http.StatusNotFound, MsgResourceNotFound, "VirtualMedia", c.params[1])
	}
	if _, aerr := actionParams(c, ejectAction); aerr != nil {
		return aerr
	}
	if aerr := s.beforeEject(c); aerr != nil {
		return aerr
	}
	md, _, aerr := s.member(c)
	if aerr != nil {
		return aerr
	}
	if err := s.svc.EjectMedia(ctx(c), c.m.ID, slot); err != nil {
		return s.modelError(c, err)
	}
	s.afterEject(c, slot, md.Image)
	s.logChange(c, "virtual media eject", zap.String("slot", string(slot)))
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// patchVirtualMedia serves older clients that insert and eject by PATCH
// (Image and Inserted), and VerifyCertificate.
func patchVirtualMedia(s *Server, c *call) *apiError {
	md, sl, aerr := s.member(c)
	if aerr != nil {
		return aerr
	}
	cur := renderJSON(0, s.memberBody(c, md, sl))
	if im := c.r.Header["If-Match"]; len(im) > 0 && !etagListed(im[0], cur.etag) {
		return newError(http.StatusPreconditionFailed, MsgPreconditionFailed)
	}
	body, aerr := readObject(c)
	if aerr != nil {
		return aerr
	}
	writable := append(slices.Clone(insertParams), "VerifyCertificate")
	for k := range body {
		if strings.Contains(k, "@") || slices.Contains(writable, k) {
			continue
		}
		if _, has := virtualMedia("", md, sl, nil)[k]; has {
			return newError(http.StatusBadRequest, MsgPropertyNotWritable, k)
		}
		return newError(http.StatusBadRequest, MsgPropertyUnknown, k)
	}
	if err := (fields{}).noChange(body); err != nil {
		return err
	}
	if v, ok := body["VerifyCertificate"]; ok {
		b, ok := v.(bool)
		if !ok {
			return newError(http.StatusBadRequest, MsgPropertyValueTypeError, argText(v), "VerifyCertificate")
		}
		if _, err := s.svc.SetMediaSettings(ctx(c), c.m.ID, md.Slot, machine.MediaPatch{VerifyCertificate: &b}); err != nil {
			return s.modelError(c, err)
		}
	}
	req, aerr := insertRequest(body, "")
	if aerr != nil {
		return aerr
	}
	_, hasImage := body["Image"]
	_, hasInserted := body["Inserted"]
	eject := (hasImage && req.Image == "") || (req.Inserted != nil && !*req.Inserted)
	switch {
	case eject:
		if aerr := s.beforeEject(c); aerr != nil {
			return aerr
		}
		if err := s.svc.EjectMedia(ctx(c), c.m.ID, md.Slot); err != nil {
			return s.modelError(c, err)
		}
		s.afterEject(c, md.Slot, md.Image)
		s.logChange(c, "virtual media eject", zap.String("slot", string(md.Slot)))
	case req.Image != "":
		if aerr := s.beforeInsert(c, sl); aerr != nil {
			return aerr
		}
		return s.insert(c, md.Slot, req, "")
	case hasInserted:
		return newError(http.StatusBadRequest, MsgPropertyMissing, "Image")
	}
	md, sl, aerr = s.member(c)
	if aerr != nil {
		return aerr
	}
	s.writeJSON(c, http.StatusOK, s.memberBody(c, md, sl))
	return nil
}

// mediaModelError maps a failed fetch of an image to the Base message that
// says why; prop names the property or parameter that gave the URI.
func (s *Server) mediaModelError(c *call, err error, action, prop string) *apiError {
	me, ok := machine.IsMediaError(err)
	if !ok {
		if errors.Is(err, machine.ErrConflict) {
			return newError(http.StatusConflict, MsgResourceInUse).with(err.Error())
		}
		return s.modelError(c, err)
	}
	status, msg := mediaErrorMessage(me, action, prop)
	return (&apiError{status: status, messages: []messageObject{msg}}).with(err.Error())
}

// mediaErrorMessage is the status and Base message of a failed fetch of
// the image given as an action's parameter param (a property when action
// is "").
func mediaErrorMessage(me *machine.MediaError, action, param string) (int, messageObject) {
	switch me.Kind {
	case machine.MediaNotFound:
		return http.StatusBadRequest, newMessage(MsgResourceMissingAtURI, me.Image)
	case machine.MediaUnreachable, machine.MediaTLS:
		return http.StatusBadRequest, newMessage(MsgCouldNotEstablishConnection, me.Image)
	case machine.MediaAuth:
		return http.StatusBadRequest, newMessage(MsgResourceAtURIUnauthorized, me.Image, me.Err.Error())
	case machine.MediaDenied:
		// Refused by vbmcd's address policy, not by the image server:
		// the message says so and which flag allows the address.
		m := newMessage(MsgAccessDenied, me.Image)
		m.Resolution = "The BMC did not connect: " + me.Err.Error() +
			". Use an image server the BMC may reach, or have the BMC's administrator allow the address."
		return http.StatusBadRequest, m
	case machine.MediaNotImage, machine.MediaForbidden, machine.MediaTooLarge:
		if action == "" {
			return http.StatusBadRequest, newMessage(MsgPropertyValueFormatError, me.Image, param)
		}
		return http.StatusBadRequest, newMessage(MsgActionParameterValueFormatError, me.Image, param, action)
	case machine.MediaNoSpace:
		return http.StatusInsufficientStorage, newMessage(MsgInsufficientStorage)
	}
	return http.StatusInternalServerError, newMessage(MsgOperationFailed)
}

// --- certificates of a member ---

func certificatesURI(c *call) string {
	return mediaBase(c) + "/VirtualMedia/" + c.params[1] + "/Certificates"
}

func getMediaCertificates(s *Server, c *call) *apiError {
	md, _, aerr := s.member(c)
	if aerr != nil {
		return aerr
	}
	u := certificatesURI(c)
	var members []string
	for _, cert := range md.Certificates {
		members = append(members, u+"/"+cert.ID)
	}
	col := collection(u, "CertificateCollection", "Certificates", members)
	col["@Redfish.SupportedCertificates"] = []string{"PEM"}
	s.writeJSON(c, http.StatusOK, col)
	return nil
}

func certificate(u string, cert machine.Certificate) obj {
	o := obj{
		"@odata.id":         u + "/" + cert.ID,
		"@odata.type":       "#Certificate.v1_5_0.Certificate",
		"Id":                cert.ID,
		"Name":              "HTTPS certificate for virtual media",
		"CertificateString": cert.PEM,
		"CertificateType":   "PEM",
	}
	if b, _ := pem.Decode([]byte(cert.PEM)); b != nil {
		if x, err := x509.ParseCertificate(b.Bytes); err == nil {
			o["Subject"] = obj{"CommonName": x.Subject.CommonName}
			o["Issuer"] = obj{"CommonName": x.Issuer.CommonName}
			o["ValidNotBefore"] = x.NotBefore.UTC().Format(time.RFC3339)
			o["ValidNotAfter"] = x.NotAfter.UTC().Format(time.RFC3339)
		}
	}
	return o
}

func postMediaCertificate(s *Server, c *call) *apiError {
	md, _, aerr := s.member(c)
	if aerr != nil {
		return aerr
	}
	body, aerr := readObject(c)
	if aerr != nil {
		return aerr
	}
	str, _ := body["CertificateString"].(string)
	if str == "" {
		return newError(http.StatusBadRequest, MsgPropertyMissing, "CertificateString")
	}
	if t, ok := body["CertificateType"]; ok && t != "PEM" {
		return newError(http.StatusBadRequest, MsgPropertyValueNotInList, argText(t), "CertificateType")
	}
	b, _ := pem.Decode([]byte(str))
	if b == nil || b.Type != "CERTIFICATE" {
		return newError(http.StatusBadRequest, MsgPropertyValueFormatError, "(certificate)", "CertificateString")
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		return newError(http.StatusBadRequest, MsgPropertyValueFormatError, "(certificate)", "CertificateString").with(err.Error())
	}
	id, err := s.svc.SetMediaSettings(ctx(c), c.m.ID, md.Slot, machine.MediaPatch{AddCertificate: &str})
	if err != nil {
		return s.modelError(c, err)
	}
	s.logChange(c, "virtual media certificate added", zap.String("slot", string(md.Slot)), zap.String("id", id))
	u := certificatesURI(c)
	c.w.Header().Set("Location", u+"/"+id)
	s.writeJSON(c, http.StatusCreated, certificate(u, machine.Certificate{ID: id, PEM: str}))
	return nil
}

func (s *Server) mediaCertificate(c *call) (machine.Media, machine.Certificate, *apiError) {
	md, _, aerr := s.member(c)
	if aerr != nil {
		return md, machine.Certificate{}, aerr
	}
	for _, cert := range md.Certificates {
		if cert.ID == c.params[2] {
			return md, cert, nil
		}
	}
	return md, machine.Certificate{}, newError(http.StatusNotFound, MsgResourceNotFound, "Certificate", c.params[2])
}

func getMediaCertificate(s *Server, c *call) *apiError {
	_, cert, aerr := s.mediaCertificate(c)
	if aerr != nil {
		return aerr
	}
	s.writeJSON(c, http.StatusOK, certificate(certificatesURI(c), cert))
	return nil
}

func deleteMediaCertificate(s *Server, c *call) *apiError {
	md, cert, aerr := s.mediaCertificate(c)
	if aerr != nil {
		return aerr
	}
	if _, err := s.svc.SetMediaSettings(ctx(c), c.m.ID, md.Slot, machine.MediaPatch{RemoveCertificate: &cert.ID}); err != nil {
		return s.modelError(c, err)
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// --- tasks ---

func task(t *machine.Task) obj {
	st := t.Status()
	health := "OK"
	switch st.State {
	case machine.TaskException:
		health = "Critical"
	case machine.TaskCancelled:
		health = "Warning"
	}
	name := "Insert " + t.Image + " into " + string(t.Slot) + " of " + t.MachineName
	target := managerURI(t.MachineID) + "/VirtualMedia/" + string(t.Slot) + "/Actions/" + insertAction
	var msgs []messageObject
	switch t.Kind {
	case machine.TaskFirmwareUpdate:
		name = "Update " + updateTargetName(t, st) + " with " + t.Image
		target = updateServiceURI + "/Actions/" + simpleUpdateAction
		msgs = updateTaskMessages(t, st)
	case machine.TaskVolumeCreate:
		name = "Create volume " + t.Volume + " of " + t.MachineName
		target = volumesURI(t.MachineID, storageID)
		msgs = []messageObject{volumeTaskMessage(st)}
	case machine.TaskConfiguration:
		name = "Configuration job of " + t.MachineName
		target = managerURI(t.MachineID)
		msgs = []messageObject{newMessage(MsgSuccess)}
		if st.State == machine.TaskRunning {
			msgs[0].Message = "The settings take effect at the machine's next boot."
		}
	default:
		msgs = []messageObject{insertTaskMessage(st)}
	}
	o := obj{
		"@odata.id":       tasksURI + "/" + t.ID,
		"@odata.type":     "#Task.v1_7_1.Task",
		"Id":              t.ID,
		"Name":            name,
		"TaskState":       string(st.State),
		"TaskStatus":      health,
		"PercentComplete": st.Percent,
		"StartTime":       t.Started.UTC().Format(time.RFC3339),
		"TaskMonitor":     monitorsURI + "/" + t.ID,
		"Messages":        msgs,
		"Payload": obj{
			"HttpOperation": "POST",
			"TargetUri":     target,
		},
	}
	if !st.Ended.IsZero() {
		o["EndTime"] = st.Ended.UTC().Format(time.RFC3339)
	}
	return o
}

// volumeTaskMessage is a volume creation's message.
func volumeTaskMessage(st machine.TaskStatus) messageObject {
	msg := newMessage(MsgSuccess)
	switch st.State {
	case machine.TaskRunning:
		msg.Message = "The volume is made at the system's next reset (OnReset)."
	case machine.TaskCancelled, machine.TaskException:
		msg = newMessage(MsgOperationFailed)
		if st.Err != nil {
			msg.Message += " " + st.Err.Error()
		}
	}
	return msg
}

// insertTaskMessage is a media insert's message.
func insertTaskMessage(st machine.TaskStatus) messageObject {
	msg := newMessage(MsgSuccess)
	switch st.State {
	case machine.TaskException:
		msg = newMessage(MsgOperationFailed)
		msg.Message += " " + st.Err.Error()
	case machine.TaskCancelled:
		msg = newMessage(MsgOperationFailed)
		msg.Message += " The insert was cancelled: the media was ejected while loading."
	case machine.TaskRunning:
		msg.Message = "Loading the image."
	}
	return msg
}

// visibleTask returns the task when the caller may reach its machine. The
// machine's BMC faults apply: a BMC that is down answers nothing about its
// tasks either.
func (s *Server) visibleTask(c *call, id string) (*machine.Task, *apiError) {
	t, err := s.svc.Task(id)
	if err == nil {
		if m, gerr := s.svc.Get(t.MachineID); gerr == nil && c.who.canAccess(m) {
			if aerr := s.machineFault(c, m); aerr != nil {
				return nil, aerr
			}
			return t, nil
		}
	}
	return nil, newError(http.StatusNotFound, MsgResourceNotFound, "Task", id)
}

func getTasks(s *Server, c *call) *apiError {
	var members []string
	for _, t := range s.svc.Tasks() {
		if m, err := s.svc.Get(t.MachineID); err == nil && c.who.canAccess(m) {
			id := t.ID
			if j := s.dell.get(dell.JobID(t.ID)); j != nil && j.Task == t {
				id = j.ID // a Dell job is its Task under its job id
			}
			members = append(members, tasksURI+"/"+id)
		}
	}
	s.writeJSON(c, http.StatusOK, collection(tasksURI, "TaskCollection", "Task Collection", members))
	return nil
}

func getTask(s *Server, c *call) *apiError {
	if strings.HasPrefix(c.params[0], "JID_") {
		return s.dellTask(c, c.params[0])
	}
	t, aerr := s.visibleTask(c, c.params[0])
	if aerr != nil {
		return aerr
	}
	s.writeJSON(c, http.StatusOK, task(t))
	return nil
}

// getTaskMonitor answers 202 with the task while it runs, then what the
// operation would have answered: for an insert 204 on success and its
// error on failure; for a firmware update or a volume creation the
// finished task (200), which Ironic reads from the monitor to learn the
// outcome.
func getTaskMonitor(s *Server, c *call) *apiError {
	t, aerr := s.visibleTask(c, c.params[0])
	if aerr != nil {
		return aerr
	}
	st := t.Status()
	switch {
	case st.State == machine.TaskRunning:
		c.w.Header().Set("Location", monitorsURI+"/"+t.ID)
		c.w.Header().Set("Retry-After", "1")
		s.writeJSON(c, http.StatusAccepted, task(t))
	case t.Kind == machine.TaskFirmwareUpdate, t.Kind == machine.TaskVolumeCreate:
		s.writeJSON(c, http.StatusOK, task(t))
	case st.State == machine.TaskCompleted:
		c.w.WriteHeader(http.StatusNoContent)
	case st.State == machine.TaskException:
		return s.mediaModelError(c, st.Err, insertAction, "Image")
	default:
		s.writeJSON(c, http.StatusOK, task(t))
	}
	return nil
}
