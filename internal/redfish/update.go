package redfish

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
)

// The UpdateService updates machines' firmware as Ironic's redfish firmware
// interface and Metal3 drive it: SimpleUpdate with an image URI and a
// target (the System, its Manager for the BMC, or a FirmwareInventory
// item), answered 202 with a task; the FirmwareInventory lists each
// system's BIOS, BMC and NIC firmware. The work is machine.UpdateFirmware's.

const (
	updateServiceURI     = rootURI + "/UpdateService"
	firmwareInventoryURI = updateServiceURI + "/FirmwareInventory"
	simpleUpdateAction   = "UpdateService.SimpleUpdate"
)

// updateProtocols are the transfer protocols SimpleUpdate fetches with.
var updateProtocols = []string{"HTTP", "HTTPS"}

// transferProtocolTypes are every value of Redfish's TransferProtocolType;
// a valid one the service does not fetch with is ignored when the URI
// names its scheme, as UpdateService says.
var transferProtocolTypes = []string{"CIFS", "FTP", "SFTP", "HTTP", "HTTPS", "NSF", "SCP", "TFTP", "OEM", "NFS"}

func updateService() obj {
	return obj{
		"@odata.id":         updateServiceURI,
		"@odata.type":       "#UpdateService.v1_11_0.UpdateService",
		"Id":                "UpdateService",
		"Name":              "Update Service",
		"ServiceEnabled":    true,
		"Status":            status("Enabled"),
		"MaxImageSizeBytes": machine.MaxFirmwareBytes,
		"FirmwareInventory": ref{firmwareInventoryURI},
		"Actions": obj{
			"#" + simpleUpdateAction: obj{
				"target": updateServiceURI + "/Actions/" + simpleUpdateAction,
				"TransferProtocol@Redfish.AllowableValues": updateProtocols,
			},
		},
	}
}

// firmwareVersion is a component's version: the updated one, else the
// factory version the service was given.
func firmwareVersion(m *machine.Machine, c machine.FirmwareComponent, id identity) string {
	if v := m.Settings.Firmware[c]; v != "" {
		return v
	}
	if c == machine.FirmwareBIOS && id.BIOSVersion != "" {
		return id.BIOSVersion
	}
	return id.Firmware
}

// firmwareItemID names a component of a machine in the FirmwareInventory:
// BIOS-<uuid>.
func firmwareItemID(m *machine.Machine, c machine.FirmwareComponent) string {
	return string(c) + "-" + m.ID
}

func softwareInventory(m *machine.Machine, c machine.FirmwareComponent, id identity) obj {
	// An array even when empty: the schema has no null here (DMTF's
	// Service-Validator fails a null RelatedItem).
	related := []ref{}
	switch c {
	case machine.FirmwareBIOS:
		related = []ref{{systemURI(m.ID)}}
	case machine.FirmwareBMC:
		related = []ref{{managerURI(m.ID)}}
	case machine.FirmwareNIC:
		for _, nid := range nicIDs(m) {
			related = append(related, ref{networkAdaptersURI(m) + "/" + nid})
		}
	}
	item := firmwareItemID(m, c)
	return obj{
		"@odata.id":               firmwareInventoryURI + "/" + item,
		"@odata.type":             "#SoftwareInventory.v1_6_0.SoftwareInventory",
		"Id":                      item,
		"Name":                    string(c) + " firmware of " + m.Name,
		"SoftwareId":              string(c),
		"Version":                 firmwareVersion(m, c, id),
		"Manufacturer":            id.Manufacturer,
		"Updateable":              true,
		"Status":                  status("Enabled"),
		"RelatedItem":             related,
		"RelatedItem@odata.count": len(related),
	}
}

func getFirmwareInventory(s *Server, c *call) *apiError {
	var members []string
	for _, m := range s.visible(c) {
		for _, fc := range machine.FirmwareComponents {
			members = append(members, firmwareInventoryURI+"/"+firmwareItemID(m, fc))
		}
	}
	s.writeJSON(c, http.StatusOK, collection(firmwareInventoryURI, "SoftwareInventoryCollection", "Firmware Inventory", members))
	return nil
}

// firmwareItem resolves a FirmwareInventory id to its machine and
// component; a machine the caller may not reach is not found.
func (s *Server) firmwareItem(c *call, item string) (*machine.Machine, machine.FirmwareComponent, bool) {
	comp, id, ok := strings.Cut(item, "-")
	if !ok || !slices.Contains(machine.FirmwareComponents, machine.FirmwareComponent(comp)) {
		return nil, "", false
	}
	m, err := s.svc.Get(id)
	if err != nil || m.ID != id || !c.who.canAccess(m) {
		return nil, "", false
	}
	return m, machine.FirmwareComponent(comp), true
}

func getFirmwareItem(s *Server, c *call) *apiError {
	m, comp, ok := s.firmwareItem(c, c.params[0])
	if !ok {
		return newError(http.StatusNotFound, MsgResourceNotFound, "SoftwareInventory", c.params[0])
	}
	if aerr := s.machineFault(c, m); aerr != nil {
		return aerr
	}
	s.writeJSON(c, http.StatusOK, softwareInventory(m, comp, s.idOf(m)))
	return nil
}

// machineFault carries out the faults of the machine an unscoped resource
// (a task, a firmware inventory item) belongs to: its BMC's resources
// answer as its BMC does.
func (s *Server) machineFault(c *call, m *machine.Machine) *apiError {
	if in := s.svc.RedfishFault(m.ID); in != (machine.Injected{}) {
		return s.inject(c, in)
	}
	return nil
}

// updateTarget resolves one Targets entry: the machine, and the component
// the URI names ("" for a System: the image says).
func (s *Server) updateTarget(c *call, uri string) (*machine.Machine, machine.FirmwareComponent, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(uri, "/"), rootURI+"/")
	if !ok {
		return nil, "", false
	}
	kind, id, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(id, "/") && kind != "UpdateService" {
		return nil, "", false
	}
	var comp machine.FirmwareComponent
	switch kind {
	case "Systems":
	case "Managers":
		comp = machine.FirmwareBMC
	case "UpdateService":
		item, ok := strings.CutPrefix(id, "FirmwareInventory/")
		if !ok {
			return nil, "", false
		}
		m, fc, ok := s.firmwareItem(c, item)
		return m, fc, ok
	default:
		return nil, "", false
	}
	m, err := s.svc.Get(id)
	if err != nil || !c.who.canAccess(m) {
		return nil, "", false
	}
	return m, comp, true
}

func postSimpleUpdate(s *Server, c *call) *apiError {
	const action = simpleUpdateAction
	body, aerr := actionParams(c, action, "ImageURI", "TransferProtocol", "Targets")
	if aerr != nil {
		return aerr
	}
	image, aerr := stringParam(body, action, "ImageURI", true)
	if aerr != nil {
		return aerr
	}
	if len(image) > machine.MaxImageURI {
		return tooLong("ImageURI", image, machine.MaxImageURI)
	}
	proto, aerr := stringParam(body, action, "TransferProtocol", false)
	if aerr != nil {
		return aerr
	}
	if proto != "" && !slices.Contains(transferProtocolTypes, proto) {
		return newError(http.StatusBadRequest, MsgActionParameterValueNotInList, proto, "TransferProtocol", action)
	}
	if !strings.Contains(image, "://") {
		// A URI without a scheme is fetched with TransferProtocol, HTTP
		// when absent (UpdateService.SimpleUpdate's ImageURI).
		if proto == "" {
			proto = "HTTP"
		}
		if !slices.Contains(updateProtocols, proto) {
			return newError(http.StatusBadRequest, MsgActionParameterValueNotInList, proto, "TransferProtocol", action).
				with("This service fetches images over HTTP and HTTPS only.")
		}
		image = strings.ToLower(proto) + "://" + image
	}
	m, comp, aerr := s.simpleUpdateTarget(c, body)
	if aerr != nil {
		return aerr
	}
	t, err := s.svc.UpdateFirmware(ctx(c), m.ID, machine.UpdateRequest{Image: image, Component: comp})
	switch {
	case errors.Is(err, machine.ErrInvalid):
		return newError(http.StatusBadRequest, MsgActionParameterValueFormatError, truncate(image, 256), "ImageURI", action).with(err.Error())
	case err != nil:
		return s.modelError(c, err)
	}
	c.m = m
	s.logChange(c, "firmware update", zap.String("image", t.Image), zap.String("component", string(comp)), zap.String("task", t.ID))
	// 202 with the task monitor in Location and no body: sushy (and so
	// Ironic) takes a Task body's @odata.id over Location as the monitor,
	// and a Task resource answers 200 while it runs, which Ironic would
	// read as the update having finished.
	c.w.Header().Set("Location", monitorsURI+"/"+t.ID)
	c.w.WriteHeader(http.StatusAccepted)
	return nil
}

// simpleUpdateTarget reads Targets: one URI of a System, a Manager or a
// FirmwareInventory item. Without Targets the one system the caller
// reaches is meant (a real BMC has one; see update_targets.go).
func (s *Server) simpleUpdateTarget(c *call, body map[string]any) (*machine.Machine, machine.FirmwareComponent, *apiError) {
	const action = simpleUpdateAction
	v, ok := body["Targets"]
	if !ok || v == nil {
		if ms := s.visible(c); len(ms) == 1 {
			return ms[0], "", nil
		}
		return nil, "", newError(http.StatusBadRequest, MsgActionParameterMissing, action, "Targets").
			with("This service has several systems and this account reaches more than one. " + s.noTargetHelp(c))
	}
	list, ok := v.([]any)
	if !ok {
		return nil, "", newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(v), "Targets", action)
	}
	if len(list) != 1 {
		return nil, "", newError(http.StatusBadRequest, MsgActionParameterValueNotInList, argText(v), "Targets", action).
			with("Give one target: a System, its Manager or a FirmwareInventory member.")
	}
	uri, ok := list[0].(string)
	if !ok {
		return nil, "", newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(list[0]), "Targets", action)
	}
	m, comp, ok := s.updateTarget(c, uri)
	if !ok {
		return nil, "", newError(http.StatusBadRequest, MsgActionParameterValueNotInList, truncate(uri, 256), "Targets", action).
			with("A target is a System, its Manager or a FirmwareInventory member of this service.")
	}
	return m, comp, nil
}

// stringParam reads a string parameter of an action.
func stringParam(body map[string]any, action, name string, required bool) (string, *apiError) {
	v, ok := body[name]
	if !ok || v == nil {
		if required {
			return "", newError(http.StatusBadRequest, MsgActionParameterMissing, action, name)
		}
		return "", nil
	}
	str, ok := v.(string)
	if !ok {
		return "", newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(v), name, action)
	}
	if str == "" && required {
		return "", newError(http.StatusBadRequest, MsgActionParameterMissing, action, name)
	}
	return str, nil
}

// updateTargetName is what a firmware task's messages call its target.
func updateTargetName(t *machine.Task, st machine.TaskStatus) string {
	if st.Component == "" {
		return t.MachineName
	}
	return string(st.Component) + " of " + t.MachineName
}

// updateMessages are a firmware task's messages, from the Update registry
// (and, for a failed transfer, the Base message that says why).
func updateTaskMessages(t *machine.Task, st machine.TaskStatus) []messageObject {
	target := updateTargetName(t, st)
	switch st.State {
	case machine.TaskCompleted:
		return []messageObject{newMessage(MsgUpdateSuccessful, target, t.Image)}
	case machine.TaskCancelled:
		m := newMessage(MsgOperationFailed)
		m.Message += " The update was cancelled: " + st.Err.Error()
		return []messageObject{m}
	case machine.TaskException:
		fe, _ := machine.IsFirmwareError(st.Err)
		id := MsgApplyFailed
		switch {
		case fe == nil:
		case fe.Kind == machine.FirmwareTransfer:
			id = MsgTransferFailed
		case fe.Kind == machine.FirmwareVerify:
			id = MsgVerificationFailed
		}
		m := newMessage(id, t.Image, target)
		m.Message += " " + st.Err.Error()
		out := []messageObject{m}
		if me, ok := machine.IsMediaError(st.Err); ok {
			_, bm := mediaErrorMessage(me, simpleUpdateAction, "ImageURI")
			out = append(out, bm)
		}
		return out
	}
	if st.Awaiting {
		m := newMessage(MsgAwaitToActivate, t.Image, target)
		m.Message += " It is installed at the system's next reset."
		return []messageObject{m}
	}
	return []messageObject{newMessage(MsgTransferringToComponent, t.Image, target)}
}
