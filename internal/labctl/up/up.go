// Package up is `labctl up`, `labctl status`, `labctl down` and `labctl
// add-node`: flag parsing, and the actions of the lab's mode (internal/lab/
// modes) run by the engine (internal/lab), one status line per action.
// Flags are checked before any host is reached; the lab file is checked
// whole by the plan and the preflight action before anything is built.
package up

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/agentmode"
	"github.com/bmlab/bmlab/internal/lab/bmcclient"
	"github.com/bmlab/bmlab/internal/lab/modes"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
)

type flags struct {
	until        string
	startStopped bool
	output       string
	lab          string
	host         string
}

// NewCommands returns up, status, down and add-node.
func NewCommands(g *cli.Globals) []*cobra.Command {
	f := &flags{}
	up := &cobra.Command{
		Use:   "up",
		Short: "Bring the lab up (idempotent; run it again to resume)",
		Long: `Bring the lab up, in the mode the lab file's mode: names (or --mode, which
must agree with a lab that exists). ipi-baremetal: preflight, network, storage, nodes,
bmcs, install-config, installer. hybrid: the kcli-style UPI flow:
preflight, install-config, network, storage, manifests, ignition,
control-plane, bootstrap-complete, remove-bootstrap, workers,
install-complete; a single node (masters 1, no workers) is installed in
place: preflight, install-config, network, storage, ignition (the live ISO
with it embedded), node, install-complete. agent: the agent-based installer: preflight,
network, storage, nodes, bmcs, install-config (and agent-config), image,
media (every node boots the ISO through its BMC), bootstrap-complete,
install-complete. Every step is idempotent: up again resumes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var actions []lab.Action
			// The flags are checked before any host is reached.
			check := func(_ *plan.Plan, m lab.Mode) error {
				actions = m.Actions()
				return lab.CheckUntil(actions, f.until)
			}
			return withLab(cmd.Context(), g, f, check, func(e *lab.Env, _ lab.Mode) error {
				e.StartStopped = f.startStopped
				if err := lab.Up(cmd.Context(), e, actions, f.until); err != nil {
					return err
				}
				fmt.Fprintln(g.Streams.Out)
				return table(cmd.Context(), g, e)
			})
		},
	}
	up.Flags().StringVar(&f.until, "until", "", "stop after this step")
	up.Flags().BoolVar(&f.startStopped, "start-stopped", false, "hybrid: also start nodes that up started before and that were shut off since (without it they stay off)")
	up.Flags().StringVar(&g.PullSecret, "pull-secret", "", "pull secret file (overrides the lab file's cluster.pullSecret)")
	up.Flags().StringVar(&g.SSHKey, "ssh-key", "", "public SSH key file (overrides the lab file's cluster.sshKey)")
	up.Flags().StringVar(&f.host, "host", "", "for a lab over several hosts: bring up this host's part (not the hub's), on that host; labctl on the hub runs it through the host's exec:")

	status := &cobra.Command{
		Use:   "status",
		Short: "Show the lab's nodes, power, BMC endpoints, MACs and IPs, and its vbmcd",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withLab(cmd.Context(), g, f, nil, func(e *lab.Env, _ lab.Mode) error { return printStatus(cmd.Context(), g, e, f.output) })
		},
	}
	status.Flags().StringVarP(&f.output, "output", "o", "table", "table or json")

	down := &cobra.Command{
		Use:   "down",
		Short: "Remove everything that bears the lab's mark, and nothing else",
		Long: `Remove everything that bears the lab's mark: its domains, libvirt networks,
links, storage pool and vbmcd, found by their marks even when the lab's
directory or state file is gone. With --lab NAME no lab file is needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withLab(cmd.Context(), g, f, nil, func(e *lab.Env, m lab.Mode) error {
				if f.lab != "" {
					// The mode is not known: every action's delete.
					return lab.Down(cmd.Context(), e, modes.All.Teardown())
				}
				return lab.Down(cmd.Context(), e, m.Actions())
			})
		},
	}
	down.Flags().StringVar(&f.lab, "lab", "", "the lab's name, when its lab file is gone")

	var count int
	var role string
	addNode := &cobra.Command{
		Use:   "add-node",
		Short: "Add workers to the running cluster of an agent-mode lab, booted through their BMCs",
		Long: `Add workers to the running cluster of an agent-mode lab (day 2), as on real
servers: the new nodes get their network reservations, disks, domains and
BMCs; the cluster makes their ISO (oc adm node-image create, with the lab's
kubeconfig); each boots it through its BMC's virtual media; oc adm node-image
monitor waits until they join, then the ISO is ejected. The added nodes are
recorded in the lab's state, so status, net and down see them. Run again
after a failure, it carries on with the nodes that have not joined.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if role != ocp.RoleWorker {
				return fmt.Errorf("--role %q: add-node adds workers (--role worker)", role)
			}
			return withLab(cmd.Context(), g, f, nil, func(e *lab.Env, _ lab.Mode) error {
				if err := agentmode.AddWorkers(cmd.Context(), e, count, g.LoadPlan); err != nil {
					return err
				}
				fmt.Fprintln(g.Streams.Out)
				return table(cmd.Context(), g, e)
			})
		},
	}
	addNode.Flags().IntVar(&count, "count", 1, "how many workers to add (0: only carry on with those not joined yet)")
	addNode.Flags().StringVar(&role, "role", ocp.RoleWorker, "the nodes' role (worker)")
	down.Flags().StringVar(&f.host, "host", "", "for a lab over several hosts: remove this host's part (not the hub's), on that host")
	return []*cobra.Command{up, status, down, addNode}
}

// withLab opens the lab the flags select (cli.Open: check sees the plan
// before any host is reached) and runs fn on it.
func withLab(ctx context.Context, g *cli.Globals, f *flags, check func(*plan.Plan, lab.Mode) error, fn func(*lab.Env, lab.Mode) error) error {
	l, err := g.Open(ctx, cli.Open{Lab: f.lab, Host: f.host, Check: check})
	if err != nil {
		return err
	}
	defer l.Close()
	return fn(l.Env, l.Mode)
}

type nodeRow struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Power string `json:"power"`
	// MAC is the NIC the node boots from (install-config's
	// bootMACAddress); NICs are all of its NICs, in the domain's order.
	MAC  string     `json:"bootMAC"`
	NICs []plan.NIC `json:"nics"`
	IP   string     `json:"ip"`
	// SecondaryIP is a dual-stack node's IPv6 address.
	SecondaryIP string `json:"secondaryIP,omitempty"`
	BMC         string `json:"bmc,omitempty"`
	UUID        string `json:"uuid"`
	Host        string `json:"host,omitempty"` // labs over several hosts
	// Vendor is the Manufacturer of the node's BMC personality (a mixed
	// rack); empty for the generic BMC.
	Vendor string `json:"vendor,omitempty"`
	// MediaFault is what the node's BMC says of its virtual CD's last
	// insert when it failed (the fetch error), while vbmcd runs.
	MediaFault string `json:"mediaFault,omitempty"`
}

// ips is the node's address, or a dual-stack node's two.
func (r nodeRow) ips() string {
	if r.SecondaryIP != "" {
		return r.IP + "," + r.SecondaryIP
	}
	return r.IP
}

// mediaFaults asks every node's BMC what its virtual CD says of its last
// insert (bmcclient.MediaFault), while the lab's vbmcd runs; a BMC that
// does not answer in time says nothing.
func mediaFaults(ctx context.Context, e *lab.Env) map[string]string {
	out := map[string]string{}
	if pids, err := e.Host.Marked(ctx, lab.KindDaemon, e.Plan.Lab); err != nil || len(pids) == 0 || !e.Plan.Vbmcd.Serves() {
		return out
	}
	c, err := bmcclient.New(e.Plan)
	if err != nil {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, n := range e.Plan.Nodes {
		if n.BMC.SystemURL == "" {
			continue
		}
		if f, err := c.MediaFault(ctx, n.BMC.SystemURL); err == nil && f != "" {
			out[n.Name] = f
		}
	}
	return out
}

func rows(ctx context.Context, e *lab.Env) ([]nodeRow, error) {
	var out []nodeRow
	faults := mediaFaults(ctx, e)
	for _, n := range e.Plan.Nodes {
		power, err := e.Host.Power(ctx, n.Name)
		if err != nil {
			return nil, err
		}
		r := nodeRow{Name: n.Name, Role: n.Role, MAC: n.BootMAC, NICs: n.NICs, IP: n.IP.String(), BMC: n.BMC.Address, UUID: n.UUID, Power: power, Host: n.Host, Vendor: n.BMC.Vendor}
		if n.SecondaryIP.IsValid() {
			r.SecondaryIP = n.SecondaryIP.String()
		}
		r.MediaFault = faults[n.Name]
		out = append(out, r)
	}
	return out, nil
}

func table(ctx context.Context, g *cli.Globals, e *lab.Env) error {
	rs, err := rows(ctx, e)
	if err != nil {
		return err
	}
	defer printFaults(g, rs)
	tw := tabwriter.NewWriter(g.Streams.Out, 0, 4, 2, ' ', 0)
	// HOST for a lab over several hosts, VENDOR for a mixed rack, NICS
	// for nodes with more than one.
	hosts := len(e.Plan.Hosts) > 0
	vendors := slices.ContainsFunc(rs, func(r nodeRow) bool { return r.Vendor != "" })
	nics := slices.ContainsFunc(rs, func(r nodeRow) bool { return len(r.NICs) > 1 })
	head := []string{"NODE", "ROLE", "POWER", "BOOT MAC", "IP", "BMC"}
	if nics {
		head = slices.Insert(head, 4, "NICS")
	}
	if vendors {
		head = slices.Insert(head, len(head)-1, "VENDOR") // before BMC
	}
	if hosts {
		head = slices.Insert(head, 1, "HOST")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rs {
		cols := []string{r.Name, r.Role, r.Power, r.MAC, r.ips(), orDash(r.BMC)}
		if nics {
			cols = slices.Insert(cols, 4, nicsText(r.NICs))
		}
		if vendors {
			cols = slices.Insert(cols, len(cols)-1, orDash(r.Vendor))
		}
		if hosts {
			cols = slices.Insert(cols, 1, r.Host)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

// printFaults says, after the table, each node whose BMC's last virtual
// media insert failed, and why.
func printFaults(g *cli.Globals, rs []nodeRow) {
	for _, r := range rs {
		if r.MediaFault != "" {
			fmt.Fprintf(g.Streams.Out, "%s: virtual media insert failed: %s\n", r.Name, r.MediaFault)
		}
	}
}

// nicsText is a node's NICs as the table shows them: the guest's name
// and the network, in order (enp1s0=provisioning,enp2s0=baremetal).
func nicsText(nics []plan.NIC) string {
	var out []string
	for _, n := range nics {
		out = append(out, n.Name+"="+n.Network+n.Bridge)
	}
	return strings.Join(out, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printStatus(ctx context.Context, g *cli.Globals, e *lab.Env, output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("--output %q: use table or json", output)
	}
	st, err := lab.LoadState(e.Plan)
	if err != nil {
		return err
	}
	phase := st.Done
	if phase == "" {
		phase = "not up"
	}
	vb := "stopped"
	if !e.Plan.Vbmcd.Serves() {
		vb = "none (no BMCs in this mode)"
	} else if pids, err := e.Host.Marked(ctx, lab.KindDaemon, e.Plan.Lab); err != nil {
		return err
	} else if len(pids) > 0 {
		vb = fmt.Sprintf("running (pid %s, log %s)", pids[0], e.Plan.Vbmcd.Log)
	}
	lldp := "stopped"
	if e.Plan.Network.LLDP == nil {
		lldp = "none (network.lldp is off)"
	} else if pids, err := e.Host.Marked(ctx, lab.KindLLDP, e.Plan.Lab); err != nil {
		return err
	} else if len(pids) > 0 {
		lldp = fmt.Sprintf("running (pid %s, log %s)", pids[0], e.Plan.Network.LLDP.Log)
	}
	// An Unmanaged provisioning network's DHCP server, the lab's own.
	dhcp := ""
	if d := e.Plan.Network.ProvisioningDHCP; d != nil {
		dhcp = "stopped"
		if pids, err := e.Host.Marked(ctx, lab.KindDHCP, e.Plan.Lab); err != nil {
			return err
		} else if len(pids) > 0 {
			dhcp = fmt.Sprintf("running (pid %s, log %s)", pids[0], d.Log)
		}
	}
	spokes := steps.CheckSpokes(ctx, e.Remote, e.Plan)
	if output == "json" {
		rs, err := rows(ctx, e)
		if err != nil {
			return err
		}
		st := map[string]any{"lab": e.Plan.Lab, "mode": e.Plan.Mode, "phase": phase, "vbmcd": vb, "lldp": lldp, "nodes": rs}
		if dhcp != "" {
			st["provisioningDHCP"] = dhcp
		}
		if len(spokes) > 0 {
			var hs []hostRow
			for _, s := range spokes {
				hs = append(hs, hostRow{Name: s.Host.Name, Checked: s.Checked() && s.Err == nil, InSync: s.Report != nil && s.Report.InSync, Network: s.String()})
			}
			st["hosts"] = hs
		}
		enc := json.NewEncoder(g.Streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	fmt.Fprintf(g.Streams.Out, "lab %s (%s): last step done: %s; vbmcd %s; LLDP sender %s\n", e.Plan.Lab, e.Plan.Mode, phase, vb, lldp)
	if dhcp != "" {
		fmt.Fprintf(g.Streams.Out, "provisioning DHCP server (Unmanaged): %s\n", dhcp)
	}
	for _, s := range spokes {
		fmt.Fprintln(g.Streams.Out, s)
	}
	fmt.Fprintln(g.Streams.Out)
	return table(ctx, g, e)
}

// hostRow is another host's network in `status -o json`.
type hostRow struct {
	Name    string `json:"name"`
	Checked bool   `json:"checked"`
	InSync  bool   `json:"inSync"`
	Network string `json:"network"`
}
