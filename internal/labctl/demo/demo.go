// Package demo is `labctl demo`: a few VMs that boot the marker ISO, each
// given a Redfish and an IPMI BMC by an in-process vbmcd, with their
// endpoints printed, for trying a BMC client without a whole lab. Ctrl-C
// stops vbmcd and removes the VMs (unless --keep).
//
// What it does not do: build a lab. It makes no network, pool or plan; the
// VMs are on no network and are found again by their name prefix. `make
// demo` is not this command: it runs `labctl up --profile tiny`.
package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/vbmcd"
	"github.com/bmlab/bmlab/internal/virt"
)

type flags struct {
	nodes        int
	prefix       string
	iso          string
	dir          string
	redfishAddr  string
	ipmiPortBase int
	username     string
	password     string
	uefi         bool
	keep         bool
}

// NewCommand returns `labctl demo`.
func NewCommand(g *cli.Globals) *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a small demo lab: VMs that boot the marker ISO, each with a Redfish and an IPMI BMC",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.nodes, "nodes", 3, "how many VMs")
	fl.StringVar(&f.prefix, "prefix", "bmlab-demo-", "name prefix of the demo VMs")
	fl.StringVar(&f.iso, "iso", "testdata/iso/marker.iso", "the ISO in every VM's CD-ROM drive (make iso builds the marker ISO)")
	fl.StringVar(&f.dir, "dir", "/var/lib/bmlab/demo", "where the VMs' serial logs go (qemu must be able to write there)")
	fl.StringVar(&f.redfishAddr, "redfish-addr", "127.0.0.1:8000", "Redfish listen address")
	fl.IntVar(&f.ipmiPortBase, "ipmi-port-base", 6230, "first IPMI port; VM i gets base+i")
	fl.StringVar(&f.username, "username", "admin", "BMC user")
	fl.StringVar(&f.password, "password", "password", "BMC password")
	fl.BoolVar(&f.uefi, "uefi", false, "UEFI firmware instead of BIOS")
	fl.BoolVar(&f.keep, "keep", false, "keep the VMs when the demo stops")
	return cmd
}

func run(ctx context.Context, g *cli.Globals, f *flags) error {
	if f.nodes < 1 || f.nodes > 64 {
		return fmt.Errorf("--nodes %d: choose 1 to 64", f.nodes)
	}
	iso, err := filepath.Abs(f.iso)
	if err != nil {
		return err
	}
	if _, err := os.Stat(iso); err != nil {
		return fmt.Errorf("the demo ISO %s is missing: run `make iso` (or pass --iso)", iso)
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("demo directory: %w", err)
	}
	log := g.Logger
	be, err := virt.New(virt.Config{Domains: []string{f.prefix + "*"}}, log.Named("libvirt"))
	if err != nil {
		return err
	}
	// The demo's own connection outlives Ctrl-C (ctx), so it can remove the
	// VMs afterwards; it ends when run returns.
	bctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := be.Connect(bctx, 20*time.Second); err != nil {
		return err
	}
	l, err := be.Conn().Client()
	if err != nil {
		return err
	}
	svc := machine.NewService(be, log)
	out := g.Streams.Out
	fmt.Fprintln(out, "✓ libvirt reachable (demo VMs use TCG, qemu's software emulation: slower than KVM, but real)")
	type node struct{ name, id string }
	var nodes []node
	for i := 1; i <= f.nodes; i++ {
		name := fmt.Sprintf("%s%d", f.prefix, i)
		spec := labvirt.DomainSpec{
			Name: name, MemoryMiB: 128, VCPUs: 1, UEFI: f.uefi, CDROM: iso,
			SerialLog: filepath.Join(f.dir, name+".serial.log"),
		}
		if f.uefi {
			spec.MemoryMiB = 256
		}
		id, err := labvirt.Wrap(l).DefineDomain(ctx, spec)
		if err != nil {
			return err
		}
		nodes = append(nodes, node{name, id})
	}
	if !f.keep {
		defer func() {
			// A fresh client: the connection may have been re-made meanwhile.
			l, err := be.Conn().Client()
			if err != nil {
				log.Warn("cannot remove the demo VMs: libvirt is not connected", zap.Error(err))
				return
			}
			for _, n := range nodes {
				if err := labvirt.Wrap(l).DeleteDomain(context.Background(), n.name); err != nil {
					log.Warn("removing a demo VM failed", zap.String("vm", n.name), zap.Error(err))
				}
			}
			fmt.Fprintf(out, "✓ removed %d demo VMs\n", len(nodes))
		}()
	}
	for i, n := range nodes {
		port := f.ipmiPortBase + i
		if _, err := svc.Await(ctx, n.id, 10*time.Second); err != nil {
			return err
		}
		if _, err := svc.UpdateSettings(ctx, n.id, func(s *machine.Settings) error {
			s.IPMI = &machine.IPMIEndpoint{Address: "127.0.0.1", Port: port}
			return nil
		}); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "✓ defined %d VMs (each boots the marker ISO from its CD-ROM and powers off)\n\n", len(nodes))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VM\tREDFISH\tIPMI\tSERIAL LOG")
	for i, n := range nodes {
		fmt.Fprintf(tw, "%s\thttps://%s/redfish/v1/Systems/%s\t127.0.0.1:%d\t%s\n", n.name, f.redfishAddr, n.id, f.ipmiPortBase+i, filepath.Join(f.dir, n.name+".serial.log"))
	}
	tw.Flush()
	first := nodes[0]
	fmt.Fprintf(out, `
Credentials: %[1]s / %[2]s. Try, in another terminal:
  curl -sk -u %[1]s:%[2]s https://%[3]s/redfish/v1/Systems/%[4]s | python3 -m json.tool
  curl -sk -u %[1]s:%[2]s -H 'Content-Type: application/json' -d '{"ResetType":"On"}' https://%[3]s/redfish/v1/Systems/%[4]s/Actions/ComputerSystem.Reset
  ipmitool -I lanplus -H 127.0.0.1 -p %[5]d -U %[1]s -P %[2]s power status
  grep -a BMLAB %[6]s
Ctrl-C stops the demo.

`, f.username, f.password, f.redfishAddr, first.id, f.ipmiPortBase, filepath.Join(f.dir, first.name+".serial.log"))
	err = vbmcd.Run(ctx, vbmcd.Streams{Out: out, ErrOut: g.Streams.ErrOut}, []string{
		"--domains", f.prefix + "*", "--redfish-addr", f.redfishAddr,
		"--username", f.username, "--password", f.password, "--log-level", "warn",
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
