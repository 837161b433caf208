package redfish

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
)

// RAID volumes of the storage subsystem (machine.Volume): POST to Volumes
// makes one over the drives given, DELETE removes it; both take effect at
// the machine's next boot, which @Redfish.OperationApplyTimeSupport says
// (OnReset). Ironic's redfish RAID interface and Metal3 drive this.

func volumesURI(id, sid string) string { return systemURI(id) + "/Storage/" + sid + "/Volumes" }

// applyTimes is what the Volumes collection says of its POST and DELETE.
func applyTimes() obj {
	return obj{
		"@odata.type":     "#Settings.v1_3_5.OperationApplyTimeSupport",
		"SupportedValues": []string{"OnReset"},
	}
}

func renderVolumes(_ *Server, c *call) any {
	if c.params[1] != storageID {
		return nil
	}
	ids := make([]string, len(c.m.Settings.Volumes))
	for i, v := range c.m.Settings.Volumes {
		ids[i] = v.ID
	}
	o := subCollection(c, "VolumeCollection", "Volume Collection", ids).(obj)
	o["@Redfish.OperationApplyTimeSupport"] = applyTimes()
	return o
}

func renderVolume(_ *Server, c *call) any {
	if c.params[1] != storageID {
		return nil
	}
	for _, v := range c.m.Settings.Volumes {
		if v.ID == c.params[2] {
			return volume(c.m, v)
		}
	}
	return nil
}

func volume(m *machine.Machine, v machine.Volume) obj {
	drives := make([]ref, len(v.Drives))
	for i, d := range v.Drives {
		drives[i] = ref{systemURI(m.ID) + "/Storage/" + storageID + "/Drives/" + url.PathEscape(d)}
	}
	// Enabled once the machine runs with it; until its next boot the
	// volume waits for that (StandbyOffline).
	st := status("StandbyOffline")
	if m.Power != machine.PowerOff && slices.ContainsFunc(m.Disks, func(d machine.Disk) bool { return v.Path != "" && d.Source == v.Path }) {
		st = status("Enabled")
	}
	return obj{
		"@odata.id":     volumesURI(m.ID, storageID) + "/" + v.ID,
		"@odata.type":   "#Volume.v1_9_0.Volume",
		"Id":            v.ID,
		"Name":          v.Name,
		"RAIDType":      v.RAIDType,
		"CapacityBytes": v.CapacityBytes,
		"Status":        st,
		"Links":         obj{"Drives": drives},
	}
}

var volumeCreateSchema = fields{
	"RAIDType":      {enum: machine.RAIDTypes},
	"Name":          {kind: kindString},
	"CapacityBytes": {kind: kindInt},
	"Links":         {sub: fields{"Drives": {kind: kindArray}}},
	// Sent by older clients; the RAID type says it all here.
	"VolumeType": {kind: kindString},
}

func postVolume(s *Server, c *call) *apiError {
	if c.params[1] != storageID {
		return newError(http.StatusNotFound, MsgResourceNotFound, "Storage", c.params[1])
	}
	body, aerr := readChecked(c, volumeCreateSchema)
	if aerr != nil {
		return aerr
	}
	if at, ok := body["@Redfish.OperationApplyTime"]; ok && at != "OnReset" {
		return newError(http.StatusBadRequest, MsgPropertyValueNotInList, argText(at), "@Redfish.OperationApplyTime").
			with("Volumes are made at the machine's next boot: OnReset.")
	}
	if _, ok := body["RAIDType"]; !ok {
		return newError(http.StatusBadRequest, MsgPropertyMissing, "RAIDType")
	}
	links, _ := body["Links"].(map[string]any)
	list, ok := links["Drives"].([]any)
	if !ok {
		return newError(http.StatusBadRequest, MsgPropertyMissing, "Links/Drives")
	}
	prefix := systemURI(c.m.ID) + "/Storage/" + storageID + "/Drives/"
	v := machine.Volume{RAIDType: body["RAIDType"].(string)}
	for _, x := range list {
		r, _ := x.(map[string]any)
		uri, _ := r["@odata.id"].(string)
		did, ok := strings.CutPrefix(uri, prefix)
		if !ok || did == "" {
			return newError(http.StatusBadRequest, MsgPropertyValueNotInList, argText(x), "Links/Drives").
				with("Name drives of this storage subsystem by their @odata.id.")
		}
		if u, err := url.PathUnescape(did); err == nil {
			did = u
		}
		v.Drives = append(v.Drives, did)
	}
	v.Name, _ = body["Name"].(string)
	if n, ok := body["CapacityBytes"].(float64); ok {
		v.CapacityBytes = int64(n)
	}
	made, t, err := s.svc.CreateVolume(ctx(c), c.m.ID, v)
	if err != nil {
		return s.modelError(c, err)
	}
	s.logChange(c, "volume created", zap.String("volume", made.ID), zap.String("raid", made.RAIDType), zap.Strings("drives", made.Drives),
		zap.String("task", t.ID))
	// The only apply time offered is OnReset: deferred work, answered as
	// real BMCs answer it, 202 with the task monitor in Location (no body:
	// sushy takes a body's @odata.id over Location as the monitor). The
	// task completes at the next reset; a 201 made Ironic take the RAID
	// step as done while its polling flag stayed set (issue 25).
	c.w.Header().Set("Location", monitorsURI+"/"+t.ID)
	c.w.WriteHeader(http.StatusAccepted)
	return nil
}

func deleteVolume(s *Server, c *call) *apiError {
	if c.params[1] != storageID {
		return newError(http.StatusNotFound, MsgResourceNotFound, "Storage", c.params[1])
	}
	return s.changed(c, s.svc.DeleteVolume(ctx(c), c.m.ID, c.params[2]), "volume deleted", zap.String("volume", c.params[2]))
}
