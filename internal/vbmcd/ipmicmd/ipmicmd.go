// Package ipmicmd is `vbmcd ipmi`: give a machine an IPMI endpoint, take it
// away, list the endpoints. It records the endpoint with the machine
// (Settings.IPMI, and Settings.Credentials when given); a running vbmcd picks
// the change up from the backend's events, without a restart.
//
// It never prints passwords.
package ipmicmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/machine"
)

// Opener gives a Service over the daemon's backend and a function that
// releases it.
type Opener func(ctx context.Context) (*machine.Service, func(), error)

// NewCommand returns the `ipmi` command with its subcommands.
//
// bmcPort says where machines with a BMC address of their own and no
// endpoint answer IPMI (the daemon's --bmc-ipmi-port when --bmc-addresses
// is set; 0 otherwise), so that list shows them too.
func NewCommand(open Opener, out io.Writer, bmcPort func() int) *cobra.Command {
	c := &cobra.Command{
		Use:   "ipmi",
		Short: "Manage the IPMI (lanplus) endpoints of machines",
	}
	c.AddCommand(newSet(open, out), newUnset(open, out), newList(open, out, bmcPort))
	return c
}

type setFlags struct {
	port     int
	address  string
	username string
	password string
}

func newSet(open Opener, out io.Writer) *cobra.Command {
	f := &setFlags{}
	c := &cobra.Command{
		Use:   "set MACHINE --port N [--address IP] [--username U --password P]",
		Short: "Give a machine an IPMI endpoint (and, optionally, its own user)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSet(cmd.Context(), open, out, args[0], f)
		},
	}
	c.Flags().IntVar(&f.port, "port", 0, "UDP port of the BMC (required)")
	c.Flags().StringVar(&f.address, "address", "", "IP address to bind (default: the daemon's --ipmi-addr)")
	c.Flags().StringVar(&f.username, "username", "", "user of this BMC only (default: the daemon's users)")
	c.Flags().StringVar(&f.password, "password", "", "password of --username")
	_ = c.MarkFlagRequired("port")
	return c
}

// sameSocket reports whether two endpoints would fight over one socket.
func sameSocket(a, b machine.IPMIEndpoint) bool {
	if a.Port != b.Port {
		return false
	}
	wild := func(s string) bool { return s == "" || s == "0.0.0.0" || s == "::" }
	return wild(a.Address) || wild(b.Address) || net.ParseIP(a.Address).Equal(net.ParseIP(b.Address))
}

func runSet(ctx context.Context, open Opener, out io.Writer, name string, f *setFlags) error {
	if f.port < 1 || f.port > 65535 {
		return fmt.Errorf("--port %d: want 1..65535", f.port)
	}
	if f.address != "" && net.ParseIP(f.address) == nil {
		return fmt.Errorf("--address %q is not an IP address", f.address)
	}
	if (f.username == "") != (f.password == "") {
		return errors.New("--username and --password go together")
	}
	if len(f.username) > 16 || len(f.password) > 20 {
		return errors.New("IPMI allows user names of up to 16 bytes and passwords of up to 20")
	}
	svc, release, err := open(ctx)
	if err != nil {
		return err
	}
	defer release()
	m, err := svc.Get(name)
	if err != nil {
		return err
	}
	ep := machine.IPMIEndpoint{Address: f.address, Port: f.port}
	for _, o := range svc.List() {
		if o.ID != m.ID && o.Settings.IPMI != nil && sameSocket(*o.Settings.IPMI, ep) {
			return fmt.Errorf("%s already uses %s", o.Name, net.JoinHostPort(o.Settings.IPMI.Address, strconv.Itoa(o.Settings.IPMI.Port)))
		}
	}
	m, err = svc.UpdateSettings(ctx, m.ID, func(s *machine.Settings) error {
		s.IPMI = &ep
		if f.username != "" {
			s.Credentials = []machine.Credential{{Username: f.username, Password: f.password}}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the IPMI endpoint of %s: %w", name, err)
	}
	fmt.Fprintf(out, "%s: IPMI on %s\n", m.Name, displayAddr(ep))
	return nil
}

func displayAddr(ep machine.IPMIEndpoint) string {
	a := ep.Address
	if a == "" {
		a = "*"
	}
	return net.JoinHostPort(a, strconv.Itoa(ep.Port))
}

func newUnset(open Opener, out io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "unset MACHINE",
		Short: "Take a machine's IPMI endpoint away (its users stay: Redfish uses them too)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			svc, release, err := open(ctx)
			if err != nil {
				return err
			}
			defer release()
			m, err := svc.UpdateSettings(ctx, args[0], func(s *machine.Settings) error {
				s.IPMI = nil
				return nil
			})
			if err != nil {
				return fmt.Errorf("remove the IPMI endpoint of %s: %w", args[0], err)
			}
			fmt.Fprintf(out, "%s: no IPMI endpoint\n", m.Name)
			return nil
		},
	}
}

// Row is one line of `ipmi list`, also its JSON form.
type Row struct {
	Name     string `json:"name"`
	UUID     string `json:"uuid"`
	Address  string `json:"address"` // empty: the daemon's address
	Port     int    `json:"port"`
	Username string `json:"username,omitempty"` // empty: the daemon's users
	Power    string `json:"power"`
	Host     string `json:"host,omitempty"` // the libvirt host, when there are several
	// BMC is the machine's own BMC address (vbmcd --bmc-addresses), where
	// its Redfish is and its IPMI when it has no endpoint of its own.
	BMC string `json:"bmc,omitempty"`
}

func newList(open Opener, out io.Writer, bmcPort func() int) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "list",
		Short: "List the machines that have an IPMI endpoint (their own, or on a BMC address of their own)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("-o %q: want table or json", format)
			}
			svc, release, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer release()
			rows := []Row{}
			port := bmcPort()
			for _, m := range svc.List() {
				ep := m.Settings.IPMI
				own := ""
				if port > 0 {
					own = m.Settings.BMCAddress
				}
				switch {
				case ep == nil && own == "":
					continue
				case ep == nil:
					ep = &machine.IPMIEndpoint{Address: own, Port: port}
				case ep.Address == "" && own != "":
					ep = &machine.IPMIEndpoint{Address: own, Port: ep.Port}
				}
				r := Row{Name: m.Name, UUID: m.ID, Address: ep.Address, Port: ep.Port, Power: string(m.Power), Host: m.Host, BMC: own}
				if _, err := svc.Get(m.ID); errors.Is(err, machine.ErrUnavailable) {
					r.Power = "Unknown (host unreachable)"
				}
				if len(m.Settings.Credentials) > 0 {
					r.Username = m.Settings.Credentials[0].Username
				}
				rows = append(rows, r)
			}
			if format == "json" {
				e := json.NewEncoder(out)
				e.SetIndent("", "  ")
				return e.Encode(rows)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tUUID\tHOST\tADDRESS\tBMC\tUSER\tPOWER")
			for _, r := range rows {
				user := r.Username
				if user == "" {
					user = "(daemon)"
				}
				host := r.Host
				if host == "" {
					host = "-"
				}
				bmc := r.BMC
				if bmc == "" {
					bmc = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.UUID, host, displayAddr(machine.IPMIEndpoint{Address: r.Address, Port: r.Port}), bmc, user, r.Power)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVarP(&format, "output", "o", "table", "table or json")
	return c
}
