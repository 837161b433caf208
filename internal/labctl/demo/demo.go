// Package demo is `labctl demo`: a few VMs that boot the marker ISO, each
// given a Redfish and an IPMI BMC by vbmcd, started as a process as `up`
// starts it (labctl links no BMC daemon), with their endpoints printed,
// for trying a BMC client without a whole lab. Ctrl-C stops vbmcd and
// removes the VMs (unless --keep).
//
// What it does not do: build a lab. It makes no network, pool or plan; the
// VMs are on no network and are found again by their name prefix. `make
// demo` is not this command: it runs `labctl up --profile tiny`.
package demo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/virt/domain"
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
	bin, err := cli.FindVbmcd(g.Vbmcd)
	if err != nil {
		return err
	}
	if bin == "" {
		return errors.New("vbmcd not found next to labctl or on PATH: run `make build` (it puts both in bin/) or pass --vbmcd")
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("demo directory: %w", err)
	}
	log := g.Logger
	// The demo's own connection outlives Ctrl-C (ctx), so it can remove the
	// VMs afterwards; it ends when run returns.
	dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	c, err := labvirt.Dial(dctx, g.LibvirtURI)
	cancel()
	if err != nil {
		return fmt.Errorf("%w; is libvirtd running?", err)
	}
	defer c.Close()
	out := g.Streams.Out
	fmt.Fprintln(out, "✓ libvirt reachable (demo VMs use TCG, qemu's software emulation: slower than KVM, but real)")
	type node struct{ name, id string }
	var nodes []node
	if !f.keep {
		defer func() {
			for _, n := range nodes {
				if err := c.DeleteDomain(context.Background(), n.name); err != nil {
					log.Warn("removing a demo VM failed", zap.String("vm", n.name), zap.Error(err))
				}
			}
			fmt.Fprintf(out, "✓ removed %d demo VMs\n", len(nodes))
		}()
	}
	for i := 1; i <= f.nodes; i++ {
		name := fmt.Sprintf("%s%d", f.prefix, i)
		spec := domain.Spec{
			Name: name, MemoryMiB: 128, VCPUs: 1, UEFI: f.uefi, CDROM: iso,
			SerialLog: filepath.Join(f.dir, name+".serial.log"),
		}
		if f.uefi {
			spec.MemoryMiB = 256
		}
		id, err := c.DefineDomain(ctx, spec)
		if err != nil {
			return err
		}
		nodes = append(nodes, node{name, id})
		// Its IPMI endpoint goes with the domain, where vbmcd reads it.
		if _, err := c.SetNodeBMC(ctx, name, f.ipmiPortBase+i-1); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "✓ defined %d VMs (each boots the marker ISO from its CD-ROM and powers off)\n", len(nodes))
	vb, err := startVbmcd(ctx, g, f, bin)
	if err != nil {
		return err
	}
	if err := vb.ready(ctx, "https://"+f.redfishAddr+"/redfish/v1/Systems/"+nodes[0].id, f.username, f.password); err != nil {
		vb.stop()
		return err
	}
	fmt.Fprintf(out, "✓ vbmcd (pid %d) serves their BMCs\n\n", vb.cmd.Process.Pid)
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
	select {
	case <-ctx.Done():
		return vb.stop()
	case <-vb.done:
		return fmt.Errorf("vbmcd stopped on its own: %v", vb.err)
	}
}

// daemon is the demo's vbmcd process.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it exited
	err  error         // how it exited, once done
}

// startVbmcd starts vbmcd for the demo's VMs, with the BMC user in its
// environment (not on its command line, where every local user reads it).
func startVbmcd(_ context.Context, g *cli.Globals, f *flags, bin string) (*daemon, error) {
	cmd := exec.Command(bin, "--libvirt-uri", g.LibvirtURI, "--domains", f.prefix+"*",
		"--redfish-addr", f.redfishAddr, "--ipmi-addr", "127.0.0.1", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "VBMCD_USERNAME="+f.username, "VBMCD_PASSWORD="+f.password)
	cmd.Stdout, cmd.Stderr = g.Streams.Out, g.Streams.ErrOut
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start vbmcd (%s): %w", bin, err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// ready waits until vbmcd answers for the first VM (30 s at most).
func (d *daemon) ready(ctx context.Context, url, user, pass string) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // vbmcd's own self-signed certificate
	}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.SetBasicAuth(user, pass)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vbmcd does not answer at %s: %w", url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.done:
			return fmt.Errorf("vbmcd stopped before it answered: %v", d.err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop ends vbmcd: SIGTERM, then SIGKILL after 10 s.
func (d *daemon) stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		return errors.New("vbmcd did not stop on SIGTERM within 10 s; killed")
	}
}
