package vbmcd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/lldp"
	"github.com/bmlab/bmlab/internal/machine"
)

// newLLDPCommand is `vbmcd lldp`: the switch side of every served
// machine's NICs. It reads the machines as vbmcd serves them (the same
// libvirt reading, the same --domains) and sends each running NIC's tap
// the LLDP frame of its LLDPReceive: at once when a tap appears or what
// it announces changes, then every --interval. It runs until stopped.
func newLLDPCommand(open func(context.Context) (*machine.Service, func(), error), errOut io.Writer) *cobra.Command {
	interval := 30 * time.Second
	cmd := &cobra.Command{
		Use:   "lldp",
		Short: "send every running NIC's tap the LLDP frames of its port's LLDPReceive, until stopped",
		Long: `vbmcd lldp plays the lab's switches: for every NIC of a served machine that
is running on a bridge, it sends LLDP frames (IEEE 802.1AB) out of the NIC's
tap with what Redfish reports as the port's LLDPReceive: the bridge as chassis
(its MAC address, or its name) and system name, the tap as port, the
management address and VLAN when there are. It sends at once when a tap
appears or changes, then every --interval, and must run in the network
namespace of the taps (libvirtd's). It runs until SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval < time.Second || interval > time.Hour {
				return fmt.Errorf("--interval %s: use 1s to 1h (802.1AB's default: 30s)", interval)
			}
			svc, release, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer release()
			sendLLDP(cmd.Context(), svc, interval, time.Second, errOut)
			return nil
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", interval, "time between two frames on one port (a new or changed port gets one at once)")
	return cmd
}

// sendLLDP looks at the machines every tick and sends what is due, until
// ctx ends. It says on w when a port starts or stops being announced, and
// each port's error once.
func sendLLDP(ctx context.Context, svc *machine.Service, interval, tick time.Duration, w io.Writer) {
	type port struct {
		l    machine.LLDP
		last time.Time
		err  string
	}
	ports := map[string]*port{}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		seen := map[string]bool{}
		now := time.Now()
		for _, m := range svc.List() {
			for _, n := range m.NICs {
				if n.LLDP == nil {
					continue
				}
				l := *n.LLDP
				seen[l.PortID] = true
				p := ports[l.PortID]
				if p != nil && p.l == l && now.Sub(p.last) < interval {
					continue
				}
				if p == nil || p.l != l {
					p = &port{l: l}
					ports[l.PortID] = p
					fmt.Fprintf(w, "lldp: announcing on %s (%s, NIC %s): chassis %s (%s), system %s\n", l.PortID, m.Name, n.MAC, l.ChassisID, l.ChassisIDSubtype, l.SystemName)
				}
				p.last = now
				if err := lldp.Send(l); err != nil {
					if err.Error() != p.err {
						fmt.Fprintln(w, err)
					}
					p.err = err.Error()
				} else {
					p.err = ""
				}
			}
		}
		for name := range ports {
			if !seen[name] {
				fmt.Fprintf(w, "lldp: %s is gone\n", name)
				delete(ports, name)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
