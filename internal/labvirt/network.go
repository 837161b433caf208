package labvirt

// Libvirt networks for the lab's bridges.
//
// The IPI bare-metal installer accepts a bridge for its bootstrap VM only
// when libvirt lists it as an interface or when an active libvirt network has
// that same name and that bridge. The lab does not rely on libvirt's
// interface listing (it needs netcf, absent on many hosts): for each lab
// bridge it defines a network named like the bridge, in forward mode
// "bridge", which attaches guests to the existing host bridge and adds no
// address, DHCP or NAT of its own (those come from libvirt's own network
// through netplumb's veth pair).
//
// Ownership is the lab's mark (MarkXML) in the network's <metadata>; a
// network with the lab's name but no such mark is foreign and is never
// changed or deleted.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/virt"
)

// ErrNetworkForeign means a libvirt network has a lab name but is not the lab's.
var ErrNetworkForeign = errors.New("libvirt network not owned by the lab")

// NetworkSpec declares a libvirt network that attaches guests to an existing
// host bridge. For the installer's bridge check, Name equals Bridge.
type NetworkSpec struct {
	Name   string
	Bridge string
	Lab    string // the owning lab
}

// NetworkState is what libvirt says about a network.
type NetworkState struct {
	Name      string `json:"name"`
	Exists    bool   `json:"exists"`
	Active    bool   `json:"active"`
	Autostart bool   `json:"autostart"`
	Forward   string `json:"forward,omitempty"`
	Bridge    string `json:"bridge,omitempty"`
	Owner     string `json:"owner,omitempty"` // the lab named in the metadata
}

// NetworkProblems lists how the state falls short of the spec, in words for
// people; none means the network is what the spec wants.
func NetworkProblems(spec NetworkSpec, st NetworkState) []string {
	switch {
	case !st.Exists:
		return []string{"missing"}
	case st.Owner != spec.Lab:
		return []string{fmt.Sprintf("not the lab's (owner %q)", st.Owner)}
	}
	var out []string
	if st.Forward != "bridge" || st.Bridge != spec.Bridge {
		out = append(out, fmt.Sprintf("wants forward mode bridge on %s, has %s on %s", spec.Bridge, orNetworkNone(st.Forward), orNetworkNone(st.Bridge)))
	}
	if !st.Active {
		out = append(out, "inactive")
	}
	if !st.Autostart {
		out = append(out, "not autostarted")
	}
	return out
}

func orNetworkNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// NetworkXML builds the network's definition.
func NetworkXML(spec NetworkSpec, uuid string) (string, error) {
	n := libvirtxml.Network{
		Name:     spec.Name,
		UUID:     uuid,
		Metadata: &libvirtxml.NetworkMetadata{XML: MarkXML(spec.Lab)},
		Forward:  &libvirtxml.NetworkForward{Mode: "bridge"},
		Bridge:   &libvirtxml.NetworkBridge{Name: spec.Bridge},
	}
	return n.Marshal()
}

// networkOwner returns the lab named in a network's metadata, or "".
func networkOwner(n *libvirtxml.Network) string {
	if n.Metadata == nil {
		return ""
	}
	return MarkOf(n.Metadata.XML)
}

// findNetwork looks a network up by name; a missing one is found=false,
// not an error.
func findNetwork(ctx context.Context, l *libvirt.Libvirt, name string) (net libvirt.Network, found bool, err error) {
	if err := ctx.Err(); err != nil {
		return net, false, err
	}
	net, err = l.NetworkLookupByName(name)
	if isNetworkNotFound(err) {
		return net, false, nil
	}
	if err != nil {
		return net, false, fmt.Errorf("look up libvirt network %q: %w", name, err)
	}
	return net, true, nil
}

// getNetworkState reads a network's state; a missing network is no error.
func getNetworkState(ctx context.Context, l *libvirt.Libvirt, name string) (NetworkState, error) {
	st := NetworkState{Name: name}
	net, found, err := findNetwork(ctx, l, name)
	if err != nil || !found {
		return st, err
	}
	st.Exists = true
	n, err := networkDef(l, net, 0)
	if err != nil {
		return st, err
	}
	st.Owner = networkOwner(n)
	if n.Forward != nil {
		st.Forward = n.Forward.Mode
	}
	if n.Bridge != nil {
		st.Bridge = n.Bridge.Name
	}
	st.Active, st.Autostart, err = runState(l, net)
	return st, err
}

// ensureNetwork defines, starts and autostarts the network, or corrects the
// lab's own network when its definition drifted. It returns whether it
// changed anything. A network of that name that is not the lab's stops it
// with ErrNetworkForeign. The bridge must exist in libvirtd's network
// namespace before the network can start.
func ensureNetwork(ctx context.Context, l *libvirt.Libvirt, spec NetworkSpec) (changed bool, err error) {
	st, err := getNetworkState(ctx, l, spec.Name)
	if err != nil {
		return false, err
	}
	if st.Exists && st.Owner != spec.Lab {
		return false, fmt.Errorf("libvirt network %q has owner %q, not the lab %q: %w; remove it (virsh net-destroy %s; virsh net-undefine %s) or rename the lab's bridge",
			spec.Name, st.Owner, spec.Lab, ErrNetworkForeign, spec.Name, spec.Name)
	}
	if len(NetworkProblems(spec, st)) == 0 {
		return false, nil
	}
	var net libvirt.Network
	if !st.Exists || st.Forward != "bridge" || st.Bridge != spec.Bridge {
		if net, err = networkDefine(l, spec, st); err != nil {
			return false, err
		}
		st.Active = false // new, or stopped to be redefined
	} else if net, err = l.NetworkLookupByName(spec.Name); err != nil {
		return false, fmt.Errorf("look up libvirt network %q: %w", spec.Name, err)
	}
	if !st.Active {
		if err := l.NetworkCreate(net); err != nil && !isNetworkError(err, libvirt.ErrOperationInvalid) {
			return true, fmt.Errorf("start libvirt network %q on bridge %q (the bridge must exist in libvirtd's network namespace): %w", spec.Name, spec.Bridge, err)
		}
	}
	if !st.Autostart {
		if err := l.NetworkSetAutostart(net, 1); err != nil {
			return true, fmt.Errorf("autostart libvirt network %q: %w", spec.Name, err)
		}
	}
	st, err = getNetworkState(ctx, l, spec.Name)
	if err != nil {
		return true, err
	}
	if p := NetworkProblems(spec, st); len(p) > 0 {
		return true, fmt.Errorf("libvirt network %q read back: %v", spec.Name, p)
	}
	return true, nil
}

// networkDefine defines (or redefines, keeping its UUID) the lab's network;
// an active network with the old definition is stopped first so the new one
// takes effect when started.
func networkDefine(l *libvirt.Libvirt, spec NetworkSpec, st NetworkState) (libvirt.Network, error) {
	var uuid string
	if st.Exists {
		old, err := l.NetworkLookupByName(spec.Name)
		if err != nil {
			return libvirt.Network{}, fmt.Errorf("look up libvirt network %q: %w", spec.Name, err)
		}
		uuid = fmt.Sprintf("%x-%x-%x-%x-%x", old.UUID[0:4], old.UUID[4:6], old.UUID[6:8], old.UUID[8:10], old.UUID[10:16])
		if st.Active {
			if err := l.NetworkDestroy(old); err != nil && !isNetworkError(err, libvirt.ErrOperationInvalid) {
				return libvirt.Network{}, fmt.Errorf("stop libvirt network %q to redefine it: %w", spec.Name, err)
			}
		}
	}
	x, err := NetworkXML(spec, uuid)
	if err != nil {
		return libvirt.Network{}, err
	}
	net, err := l.NetworkDefineXML(x)
	if err != nil {
		return libvirt.Network{}, fmt.Errorf("define libvirt network %q: %w", spec.Name, err)
	}
	return net, nil
}

// deleteNetwork stops and undefines the lab's network; a missing network is
// no error, a foreign one is ErrNetworkForeign and is left alone. It returns
// whether it deleted anything.
func deleteNetwork(ctx context.Context, l *libvirt.Libvirt, name, lab string) (deleted bool, err error) {
	st, err := getNetworkState(ctx, l, name)
	if err != nil || !st.Exists {
		return false, err
	}
	if st.Owner != lab {
		return false, fmt.Errorf("libvirt network %q has owner %q, not the lab %q: %w; left alone", name, st.Owner, lab, ErrNetworkForeign)
	}
	net, err := l.NetworkLookupByName(name)
	if isNetworkNotFound(err) {
		return false, nil
	}
	if err == nil {
		var def *libvirtxml.Network
		if def, err = networkDef(l, net, libvirt.NetworkXMLInactive); err == nil {
			if others := sharedOthers(def, lab); len(others) > 0 {
				return false, fmt.Errorf("libvirt network %q of lab %q carries the entries of labs %s, which share it (network.shared): %w; left alone: take them down first (labctl down --lab NAME), then this lab's down again",
					name, lab, strings.Join(others, ", "), ErrNetworkShared)
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("look up libvirt network %q: %w", name, err)
	}
	if st.Active {
		if err := l.NetworkDestroy(net); err != nil && !isNetworkError(err, libvirt.ErrOperationInvalid) && !isNetworkNotFound(err) {
			return false, fmt.Errorf("stop libvirt network %q: %w", name, err)
		}
	}
	if err := l.NetworkUndefine(net); err != nil && !isNetworkNotFound(err) {
		return false, fmt.Errorf("undefine libvirt network %q: %w", name, err)
	}
	return true, nil
}

func isNetworkNotFound(err error) bool { return isNetworkError(err, libvirt.ErrNoNetwork) }

func isNetworkError(err error, code libvirt.ErrorNumber) bool { return virt.IsCode(err, code) }

// networkCIDRs are the addresses of every libvirt network, by name.
func networkCIDRs(_ context.Context, l *libvirt.Libvirt) (map[string][]netip.Prefix, error) {
	nets, _, err := l.ConnectListAllNetworks(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list libvirt networks: %w", err)
	}
	out := map[string][]netip.Prefix{}
	for _, n := range nets {
		def, err := networkDef(l, n, 0)
		if err != nil {
			continue // gone meanwhile
		}
		for _, ip := range def.IPs {
			a, err := netip.ParseAddr(ip.Address)
			if err != nil {
				continue
			}
			bits := int(ip.Prefix)
			if bits == 0 && ip.Netmask != "" {
				if m, err := netip.ParseAddr(ip.Netmask); err == nil {
					bits = maskBits(m)
				}
			}
			if p, err := a.Prefix(bits); err == nil {
				out[n.Name] = append(out[n.Name], p)
			}
		}
	}
	return out, nil
}

func maskBits(m netip.Addr) int {
	n := 0
	for _, b := range m.AsSlice() {
		for ; b&0x80 != 0; b <<= 1 {
			n++
		}
	}
	return n
}
