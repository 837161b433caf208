package vbmcd

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bmlab/bmlab/internal/simfile"
)

// vbmcd sushy-emulator runs vbmcd as sushy-tools' sushy-emulator is run:
// with its flags and its configuration file (SUSHY_EMULATOR_CONFIG), so
// that a tool that starts a container of sushy-tools' image with
// `sushy-emulator ARGS` as its command (BMO's vbmctl does) starts vbmcd's
// image the same way: the image's entrypoint is vbmcd, and the command
// becomes `vbmcd sushy-emulator ARGS`. The flags and settings are mapped
// onto vbmcd's (docs/metal3.md has the table) and vbmcd runs as usual.

// sushyFlags are sushy-emulator's flags.
type sushyFlags struct {
	config, iface, port, cert, key, libvirtURI, storagePool, featureSet, osCloud, ironicCloud string
	fake, debug                                                                               bool
}

func (f *sushyFlags) bind(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&f.config, "config", getenv("SUSHY_EMULATOR_CONFIG"), "sushy-tools' configuration file (default: $SUSHY_EMULATOR_CONFIG)")
	fs.StringVarP(&f.iface, "interface", "i", "", "address to listen on (SUSHY_EMULATOR_LISTEN_IP; default 127.0.0.1)")
	fs.StringVarP(&f.port, "port", "p", "", "port to listen on (SUSHY_EMULATOR_LISTEN_PORT; default 8000)")
	fs.StringVar(&f.cert, "ssl-certificate", "", "TLS certificate (SUSHY_EMULATOR_SSL_CERT; default: plain HTTP, as sushy-emulator)")
	fs.StringVar(&f.key, "ssl-key", "", "its key (SUSHY_EMULATOR_SSL_KEY)")
	fs.StringVar(&f.libvirtURI, "libvirt-uri", "", "libvirt URI (SUSHY_EMULATOR_LIBVIRT_URI; default qemu:///system)")
	fs.BoolVar(&f.fake, "fake", false, "serve the fake systems (SUSHY_EMULATOR_FAKE_DRIVER) with vbmcd's sim backend")
	fs.BoolVar(&f.debug, "debug", false, "debug logging")
	fs.StringVar(&f.storagePool, "storage-pool", "", "taken and not used: vbmcd keeps virtual media in its own cache (--media-dir)")
	fs.StringVar(&f.featureSet, "feature-set", "", "taken and not used: vbmcd serves every feature")
	fs.StringVar(&f.osCloud, "os-cloud", "", "refused: vbmcd has no OpenStack driver")
	fs.StringVar(&f.ironicCloud, "ironic-cloud", "", "refused: vbmcd has no Ironic driver")
}

// newSushyCommand is `vbmcd sushy-emulator`.
func newSushyCommand(streams Streams, getenv func(string) string) *cobra.Command {
	var f sushyFlags
	own := pflag.NewFlagSet("sushy-emulator", pflag.ContinueOnError)
	f.bind(own, getenv)
	cmd := &cobra.Command{
		Use:   "sushy-emulator [flags]",
		Short: "run as sushy-tools' sushy-emulator: its flags and configuration file, mapped onto vbmcd's",
		Long: `vbmcd sushy-emulator takes sushy-tools' sushy-emulator's flags and its
configuration file (--config, else $SUSHY_EMULATOR_CONFIG), maps them onto
vbmcd's settings and runs vbmcd: --fake (SUSHY_EMULATOR_FAKE_DRIVER) serves
SUSHY_EMULATOR_FAKE_SYSTEMS with the sim backend and their notifier, else
the libvirt backend serves the domains of --libvirt-uri. As sushy-emulator,
it fetches virtual media from any address without verifying certificates
unless SUSHY_EMULATOR_VMEDIA_VERIFY_SSL is True, and, unlike it, refuses
event destinations on loopback (vbmcd's --events-allow-loopback, not given
here, allows them). SUSHY_EMULATOR_AUTH_FILE, an htpasswd file of bcrypt
entries as sushy-tools takes, gives the Redfish users (vbmcd
--htpasswd-file; any other entry stops vbmcd before it listens); without
it the BMC user is vbmcd's (VBMCD_USERNAME, VBMCD_PASSWORD; admin and the
built-in password, which vbmcd takes on loopback only, by default). Every
other VBMCD_* variable applies too. A container of vbmcd's image started with the command
"sushy-emulator ..." (as BMO's vbmctl starts sushy-tools') runs this.

With no arguments at all (the image's default command), it starts as
Metal3's sushy-tools image does: --config ${SUSHY_TOOLS_CONFIG:-/root/sushy/conf.py}
when that file exists, and --interface :: unless the file sets
SUSHY_EMULATOR_LISTEN_IP (metal3-dev-env runs the image with no command
and its configuration directory mounted at /root/sushy).`,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		SilenceErrors:      true,
		SilenceUsage:       true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = metal3ImageArgs(getenv)
			}
			if err := own.Parse(args); err != nil {
				if err == pflag.ErrHelp {
					return cmd.Help()
				}
				return fmt.Errorf("sushy-emulator: %w; vbmcd takes sushy-emulator's --config, --interface (-i), --port (-p), --ssl-certificate, --ssl-key, --libvirt-uri, --fake, --debug, --storage-pool and --feature-set (see vbmcd sushy-emulator --help); its other drivers (VMware, OpenStack, Ironic) are not vbmcd's", err)
			}
			if own.NArg() > 0 {
				return fmt.Errorf("sushy-emulator takes no arguments, got %q", own.Args())
			}
			vargs, notes, err := f.vbmcdArgs()
			if err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintln(streams.ErrOut, "vbmcd sushy-emulator:", n)
			}
			fmt.Fprintln(streams.ErrOut, "vbmcd sushy-emulator: running vbmcd", strings.Join(vargs, " "))
			root := NewCommand(streams, getenv)
			root.SetArgs(vargs)
			return root.ExecuteContext(cmd.Context())
		},
	}
	cmd.Flags().AddFlagSet(own) // for help and for the docs' check
	return cmd
}

// metal3ImageArgs are the arguments Metal3's sushy-tools image gives
// sushy-emulator when it is run without a command (metal3-dev-env runs it
// so): the configuration ${SUSHY_TOOLS_CONFIG:-/root/sushy/conf.py} when it
// exists, and every address (::) unless the file sets
// SUSHY_EMULATOR_LISTEN_IP.
func metal3ImageArgs(getenv func(string) string) []string {
	conf := getenv("SUSHY_TOOLS_CONFIG")
	if conf == "" {
		conf = "/root/sushy/conf.py"
	}
	var args []string
	if st, err := os.Stat(conf); err == nil && st.Mode().IsRegular() {
		args = append(args, "--config", conf)
		if set, err := simfile.SushySettings(conf, "SUSHY_EMULATOR_LISTEN_IP"); err == nil {
			if _, ok := set["SUSHY_EMULATOR_LISTEN_IP"]; ok {
				return args
			}
		}
	}
	return append(args, "--interface", "::")
}

// sushy-tools' settings that vbmcd maps.
var sushyKeys = []string{
	"SUSHY_EMULATOR_LISTEN_IP", "SUSHY_EMULATOR_LISTEN_PORT", "SUSHY_EMULATOR_SSL_CERT", "SUSHY_EMULATOR_SSL_KEY",
	"SUSHY_EMULATOR_LIBVIRT_URI", "SUSHY_EMULATOR_FAKE_DRIVER", "SUSHY_EMULATOR_FAKE_SYSTEMS", "SUSHY_EMULATOR_AUTH_FILE",
	"SUSHY_EMULATOR_VMEDIA_VERIFY_SSL", "SUSHY_EMULATOR_OS_CLOUD", "SUSHY_EMULATOR_IRONIC_CLOUD", "SUSHY_EMULATOR_VMWARE_DRIVER",
}

// vbmcdArgs maps sushy-emulator's flags and configuration onto vbmcd's
// flags, as sushy-emulator lets a flag win over the file; notes say what
// is not taken.
func (f *sushyFlags) vbmcdArgs() (args, notes []string, err error) {
	set := map[string]any{}
	if f.config != "" {
		if set, err = simfile.SushySettings(f.config, sushyKeys...); err != nil {
			return nil, nil, err
		}
	}
	str := func(flag, key, def string) (string, error) {
		if flag != "" {
			return flag, nil
		}
		switch v := set[key].(type) {
		case nil:
			return def, nil
		case string:
			return v, nil
		case int64:
			return strconv.FormatInt(v, 10), nil
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64), nil
		}
		return "", fmt.Errorf("%s: %s is %v; want a string or a number", f.config, key, set[key])
	}
	truthy := func(key string) bool {
		switch v := set[key].(type) {
		case bool:
			return v
		case string:
			return v != ""
		case int64:
			return v != 0
		}
		return false
	}
	if c, _ := str(f.osCloud, "SUSHY_EMULATOR_OS_CLOUD", ""); c != "" {
		return nil, nil, fmt.Errorf("sushy-emulator: the OpenStack driver (--os-cloud, SUSHY_EMULATOR_OS_CLOUD) is not vbmcd's; use --fake or --libvirt-uri")
	}
	if c, _ := str(f.ironicCloud, "SUSHY_EMULATOR_IRONIC_CLOUD", ""); c != "" {
		return nil, nil, fmt.Errorf("sushy-emulator: the Ironic driver (--ironic-cloud, SUSHY_EMULATOR_IRONIC_CLOUD) is not vbmcd's; use --fake or --libvirt-uri")
	}
	if truthy("SUSHY_EMULATOR_VMWARE_DRIVER") {
		return nil, nil, fmt.Errorf("sushy-emulator: %s: the VMware driver (SUSHY_EMULATOR_VMWARE_DRIVER) is not vbmcd's; use SUSHY_EMULATOR_FAKE_DRIVER or SUSHY_EMULATOR_LIBVIRT_URI", f.config)
	}
	var bad error
	get := func(flag, key, def string) string {
		v, err := str(flag, key, def)
		if err != nil && bad == nil {
			bad = err
		}
		return v
	}
	ip := get(f.iface, "SUSHY_EMULATOR_LISTEN_IP", "127.0.0.1")
	port := get(f.port, "SUSHY_EMULATOR_LISTEN_PORT", "8000")
	cert := get(f.cert, "SUSHY_EMULATOR_SSL_CERT", "")
	key := get(f.key, "SUSHY_EMULATOR_SSL_KEY", "")
	if bad != nil {
		return nil, nil, bad
	}
	if (cert == "") != (key == "") {
		return nil, nil, fmt.Errorf("sushy-emulator: a TLS certificate and its key go together (--ssl-certificate and --ssl-key, or SUSHY_EMULATOR_SSL_CERT and SUSHY_EMULATOR_SSL_KEY); give both, or neither for plain HTTP")
	}
	args = []string{"--redfish-addr", net.JoinHostPort(ip, port), "--media-allow-loopback"}
	if cert != "" {
		args = append(args, "--tls-cert", cert, "--tls-key", key)
	} else {
		args = append(args, "--insecure-http")
	}
	if !truthy("SUSHY_EMULATOR_VMEDIA_VERIFY_SSL") {
		args = append(args, "--media-insecure-tls")
	}
	if f.debug {
		args = append(args, "--log-level", "debug")
	}
	if f.fake || truthy("SUSHY_EMULATOR_FAKE_DRIVER") {
		systems := f.config
		if _, ok := set["SUSHY_EMULATOR_FAKE_SYSTEMS"]; !ok {
			// The fake driver's own default: one system named fake.
			if systems, err = defaultFakeSystems(); err != nil {
				return nil, nil, err
			}
			notes = append(notes, "no SUSHY_EMULATOR_FAKE_SYSTEMS: serving the fake driver's default system, fake")
		}
		args = append(args, "--backend", "sim", "--sim-systems", systems)
	} else {
		uri, err := str(f.libvirtURI, "SUSHY_EMULATOR_LIBVIRT_URI", "")
		if err != nil {
			return nil, nil, err
		}
		for _, env := range []string{"SUSHY_EMULATOR_LIBVIRT_URL", "SUSHY_EMULATOR_LIBVIRT_URI"} {
			if v := os.Getenv(env); v != "" && f.libvirtURI == "" {
				uri = v
			}
		}
		if uri == "" {
			uri = "qemu:///system"
		}
		args = append(args, "--backend", "libvirt", "--libvirt-uri", uri)
	}
	switch a, ok := set["SUSHY_EMULATOR_AUTH_FILE"].(string); {
	case ok && a != "":
		// As sushy-tools: its users, bcrypt entries only (else vbmcd
		// refuses to start); the built-in password is not served.
		args = append(args, "--htpasswd-file", a)
	case set["SUSHY_EMULATOR_AUTH_FILE"] != nil:
		return nil, nil, fmt.Errorf("%s: SUSHY_EMULATOR_AUTH_FILE is %v; want the path of an htpasswd file", f.config, set["SUSHY_EMULATOR_AUTH_FILE"])
	default:
		notes = append(notes, "no SUSHY_EMULATOR_AUTH_FILE: Redfish asks for vbmcd's user (VBMCD_USERNAME and VBMCD_PASSWORD, or VBMCD_CREDENTIALS_FILE; admin and the built-in password, on loopback only, unless set), where sushy-tools would ask for none")
	}
	if f.storagePool != "" {
		notes = append(notes, "--storage-pool is not used: virtual media goes into vbmcd's cache (--media-dir)")
	}
	if f.featureSet != "" {
		notes = append(notes, "--feature-set is not used: vbmcd serves every feature")
	}
	return args, notes, nil
}

// defaultFakeSystems writes the fake driver's default system list (its
// initialize()) where vbmcd can read it.
func defaultFakeSystems() (string, error) {
	list := []map[string]any{{
		"uuid": "27946b59-9e44-4fa7-8e91-f3527a1ef094", "name": "fake", "power_state": "Off", "external_notifier": false,
		"nics": []map[string]string{{"mac": "00:5c:52:31:3a:9c", "ip": "172.22.0.100"}},
	}}
	b, _ := json.Marshal(list)
	f, err := os.CreateTemp("", "vbmcd-fake-systems-*.json")
	if err != nil {
		return "", fmt.Errorf("the fake driver's default system: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return "", fmt.Errorf("the fake driver's default system: %w", err)
	}
	return f.Name(), f.Close()
}
