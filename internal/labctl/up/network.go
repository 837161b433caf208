package up

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/virt"
)

// natBridge names the bridge of the lab's own NAT network (15 bytes at most).
func natBridge(lab string) string {
	b := "bmnat-" + lab
	if len(b) > 15 {
		b = b[:15]
	}
	return b
}

// ownNAT makes the lab bring its own NAT network (the machine network, with
// DHCP reservations and DNS records) instead of borrowing libvirt's default
// one on virbr0: the seed veth then joins baremetal to the lab's NAT bridge.
// A lab file that names another libvirtBridge keeps it.
func ownNAT(cfg *labconfig.Config) bool {
	if cfg.Network.LibvirtBridge != labconfig.DefaultLibvirtBridge {
		return false
	}
	br := natBridge(cfg.Name)
	for i, v := range cfg.Network.Veths {
		if v.PeerMaster == labconfig.DefaultLibvirtBridge {
			cfg.Network.Veths[i].PeerMaster = br
		}
	}
	cfg.Network.LibvirtBridge = br
	return true
}

// reserve gives node i the i-th address of the DHCP range.
func reserve(cfg *labconfig.Config, spec *lab.Spec) error {
	ip := cfg.Cluster.DHCPRange.Start
	for i := range spec.Nodes {
		if !ip.IsValid() || !cfg.Cluster.DHCPRange.Contains(ip) {
			return fmt.Errorf("the DHCP range %s has no room for %d nodes; widen cluster.dhcpRange", cfg.Cluster.DHCPRange, len(spec.Nodes))
		}
		spec.Nodes[i].IP = ip.String()
		ip = ip.Next()
	}
	return nil
}

func natSpec(cfg *labconfig.Config, spec lab.Spec) virt.LabNetworkSpec {
	k := cfg.Cluster
	ns := virt.LabNetworkSpec{
		Name: cfg.Name + "-machine", Bridge: cfg.Network.LibvirtBridge, Lab: cfg.Name,
		CIDR: k.MachineNetwork, DHCPStart: k.DHCPRange.Start, DHCPEnd: k.DHCPRange.End,
		MTU: uint(cfg.Network.MTU), Domain: k.Name + "." + k.BaseDomain,
		APIVIP: k.APIVIP, IngressVIP: k.IngressVIP,
	}
	for _, n := range spec.Nodes {
		ip, _ := netip.ParseAddr(n.IP)
		ns.Hosts = append(ns.Hosts, virt.LabHost{MAC: n.MAC, IP: ip, Hostname: n.Name})
	}
	return ns
}

// networkStep ensures, in dependency order: the lab's NAT network (its
// bridge is the veth's far end), the bridges and veths (netplumb, in the
// namespace netns), and a libvirt network named like each lab bridge, which
// is what the installer's bridge check accepts.
func networkStep(l *lab.Lab, cfg *labconfig.Config, f *flags, own bool) lab.Step {
	top := cfg.Network.Topology()
	return lab.Step{
		Name: "network",
		Ensure: func(ctx context.Context) (bool, error) {
			lc, err := l.Be.Conn().Client()
			if err != nil {
				return false, err
			}
			changed := false
			if own {
				c, err := virt.EnsureLabNetwork(ctx, lc, natSpec(cfg, l.Spec))
				if err != nil {
					return false, err
				}
				changed = changed || c
			}
			h, err := netplumb.OpenNamespace(f.netns)
			if err != nil {
				return changed, err
			}
			defer h.Close()
			plan, err := netplumb.New(h, cfg.Name, l.Log.Named("netplumb")).Apply(ctx, top)
			if err != nil {
				return changed, err
			}
			changed = changed || len(plan.Steps) > 0
			for _, name := range cfg.Network.LibvirtNetworks() {
				c, err := virt.EnsureNetwork(ctx, lc, virt.NetworkSpec{Name: name, Bridge: name, Lab: cfg.Name})
				if err != nil {
					return changed, err
				}
				changed = changed || c
			}
			return changed, nil
		},
		Delete: func(ctx context.Context) error {
			lc, err := l.Be.Conn().Client()
			if err != nil {
				return err
			}
			for _, name := range cfg.Network.LibvirtNetworks() {
				if _, err := virt.DeleteNetwork(ctx, lc, name, cfg.Name); err != nil {
					return err
				}
			}
			h, err := netplumb.OpenNamespace(f.netns)
			if err != nil {
				return err
			}
			defer h.Close()
			if _, err := netplumb.New(h, cfg.Name, l.Log.Named("netplumb")).Down(ctx, top); err != nil {
				return err
			}
			if own {
				if _, err := virt.DeleteLabNetwork(ctx, lc, cfg.Name+"-machine", cfg.Name); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
