package labvirt

import (
	"strconv"
	"strings"

	"github.com/bmlab/bmlab/internal/plan"
)

// The lab's processes as this provider starts them: the plan says what
// vbmcd and its LLDP sender serve; their command lines are built here.

// process is a process of the lab: its program, arguments (argv without
// argv[0]), environment added to labctl's, and log.
type process struct {
	Path string
	Args []string
	Env  []string
	Log  string
}

// libvirtFlags are vbmcd's --libvirt-uri flags: name=uri for a host of a
// lab over several hosts, the URI alone for a lab on one.
func libvirtFlags(uris []plan.LibvirtURI) []string {
	var out []string
	for _, u := range uris {
		if u.Host != "" {
			out = append(out, "--libvirt-uri", u.Host+"="+u.URI)
		} else {
			out = append(out, "--libvirt-uri", u.URI)
		}
	}
	return out
}

// vbmcdProcess is vbmcd serving the lab's BMCs (cmd/vbmcd's flags).
func vbmcdProcess(v plan.Vbmcd) process {
	args := append(libvirtFlags(v.Libvirt),
		"--domains", strings.Join(v.Domains, ","),
		"--redfish-addr", v.RedfishAddr,
		"--credentials-file", v.CredentialsFile,
		"--state-dir", v.StateDir,
		"--media-dir", v.MediaDir,
		"--log-format", "json",
		"--max-starting", strconv.Itoa(v.MaxStarting),
		"--start-gap", v.StartGap.String(),
	)
	if v.InsecureHTTP {
		args = append(args, "--insecure-http")
	}
	if v.TLSCert != "" {
		args = append(args, "--tls-cert", v.TLSCert, "--tls-key", v.TLSKey)
	}
	if v.IPMIAddr != "" {
		args = append(args, "--ipmi-addr", v.IPMIAddr)
	}
	if len(v.BMCAddresses) > 0 {
		pins := make([]string, len(v.BMCAddresses))
		for i, a := range v.BMCAddresses {
			pins[i] = a.Node + "=" + a.Addr.String()
		}
		args = append(args, "--bmc-addresses", strings.Join(pins, ","))
	}
	if v.CACert != "" {
		args = append(args, "--tls-ca-cert", v.CACert, "--tls-ca-key", v.CAKey)
	}
	return process{Path: v.Path, Args: args, Env: v.Env, Log: v.Log}
}

// senderProcess is the lab's LLDP sender: `vbmcd lldp`.
func senderProcess(s plan.LLDPSender) process {
	args := append(append([]string{"lldp"}, libvirtFlags(s.Libvirt)...), "--domains", strings.Join(s.Domains, ","))
	return process{Path: s.Path, Args: args, Env: s.Env, Log: s.Log}
}

// dhcpProcess is the provisioning network's DHCP server: dnsmasq in the
// foreground (the provider supervises it), reading the lab's
// configuration file, without a pid file, logging to the lab's log.
func dhcpProcess(d plan.DHCPServer) process {
	args := []string{"--keep-in-foreground", "--conf-file=" + d.ConfigFile, "--pid-file=", "--log-facility=" + d.Log}
	return process{Path: d.Path, Args: args, Env: d.Env, Log: d.Log}
}
