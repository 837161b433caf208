package redfish

import (
	"errors"
	"net/http"
	"net/url"
	"slices"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
)

// Boot options (Redfish BootOption, ComputerSystem Boot.BootOrder and
// Boot.BootNext): every bootable device of a system, the persistent order
// it boots them in, and the option an UefiBootNext override boots. The
// model is machine/bootorder.go's.

func bootOptionsURI(m *machine.Machine) string { return systemURI(m.ID) + "/BootOptions" }

func renderBootOptions(_ *Server, c *call) any {
	var refs []string
	for _, o := range c.m.BootOptions() {
		refs = append(refs, url.PathEscape(o.Ref))
	}
	return subCollection(c, "BootOptionCollection", "Boot Option Collection", refs)
}

func renderBootOption(_ *Server, c *call) any {
	o, ok := c.m.BootOption(c.params[1])
	if !ok {
		return nil
	}
	return bootOption(c.m, o)
}

func bootOption(m *machine.Machine, o machine.BootOption) obj {
	enabled := slices.Contains(m.BootOrder(), o.Ref) ||
		m.Settings.Boot.Effective() == machine.BootUefiBootNext && m.Settings.Boot.BootNext == o.Ref
	related := []ref{}
	if o.NIC {
		related = append(related, ref{systemURI(m.ID) + "/EthernetInterfaces/" + nicID(machine.NIC{MAC: o.Device})})
	} else if o.Alias != machine.BootCd {
		// A CD drive is virtual media, not a Storage drive.
		related = append(related, ref{systemURI(m.ID) + "/Storage/" + storageID + "/Drives/" + url.PathEscape(o.Device)})
	}
	return obj{
		"@odata.id":               bootOptionsURI(m) + "/" + url.PathEscape(o.Ref),
		"@odata.type":             "#BootOption.v1_0_4.BootOption",
		"Id":                      o.Ref,
		"Name":                    "Boot Option " + o.Ref,
		"BootOptionReference":     o.Ref,
		"DisplayName":             o.DisplayName,
		"BootOptionEnabled":       enabled,
		"Alias":                   string(o.Alias),
		"RelatedItem":             related,
		"RelatedItem@odata.count": len(related),
	}
}

// bootOrderProps are the boot order's properties of a system's Boot.
func bootOrderProps(m *machine.Machine) obj {
	return obj{
		"BootOrder":   m.BootOrder(),
		"BootNext":    nullable(m.Settings.Boot.BootNext),
		"BootOptions": ref{bootOptionsURI(m)},
	}
}

// patchBootOrder carries out Boot.BootOrder of a system PATCH: a list of
// BootOptionReferences, stored for the next start on.
func (s *Server) patchBootOrder(c *call, boot map[string]any) *apiError {
	v, ok := boot["BootOrder"]
	if !ok {
		return nil
	}
	list, _ := v.([]any)
	refs := make([]string, 0, len(list))
	for _, x := range list {
		r, ok := x.(string)
		if !ok {
			return newError(http.StatusBadRequest, MsgPropertyValueTypeError, argText(x), "BootOrder")
		}
		if _, ok := c.m.BootOption(r); !ok {
			return newError(http.StatusBadRequest, MsgPropertyValueNotInList, truncate(r, 128), "BootOrder").
				with("A boot order lists references of this system's BootOptions members.")
		}
		refs = append(refs, r)
	}
	if _, err := s.svc.SetBootOrder(ctx(c), c.m.ID, refs); err != nil {
		if errors.Is(err, machine.ErrInvalid) {
			return newError(http.StatusBadRequest, MsgPropertyValueConflict, "BootOrder", "BootOrder").with(err.Error())
		}
		return s.modelError(c, err)
	}
	s.logChange(c, "boot order changed", zap.Strings("order", refs))
	return nil
}

// bootNextError maps SetBoot's BootNext refusals.
func bootNextError(err error, p machine.BootPatch) *apiError {
	switch {
	case errors.Is(err, machine.ErrNoBootNext):
		return newError(http.StatusBadRequest, MsgPropertyMissing, "BootNext").with(err.Error())
	case p.BootNext != nil && errors.Is(err, machine.ErrInvalid):
		return newError(http.StatusBadRequest, MsgPropertyValueNotInList, truncate(*p.BootNext, 128), "BootNext").with(err.Error())
	}
	return nil
}
