package vbmcd

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/listen"
	"github.com/bmlab/bmlab/internal/media"
	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/pki"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/virt"
)

// Config is everything the daemon is told. Every field is a flag, a key of
// the YAML config file (the flag's name) and an environment variable
// (VBMCD_ + the flag's name in upper case with '_' for '-'). Flags win over
// the environment, which wins over the file.
type Config struct {
	Backend         string
	Libvirt         []virt.Host
	Domains         []string
	SimNodes        int
	SimDelay        time.Duration
	SimSystems      string // a systems file (simfile), instead of SimNodes alike machines
	SimNotifyURL    string // where announcements go, over the file's
	SimMedia        string // how simulated machines take virtual media: fetch or probe
	Kubeconfig      string
	KubeNamespaces  []string
	KubeSelector    string
	KubeMediaAddr   string // listen address of the image server CDI imports from
	KubeMediaURL    string // the image server's URL as the cluster reaches it
	RedfishAddr     string
	Username        string
	Password        string
	CredentialsFile string
	HtpasswdFile    string // Redfish users of an htpasswd file (bcrypt entries)
	TLSCert         string
	TLSKey          string
	TLSSANs         []string
	TLSMinVersion   string
	TLSCipherSuites []string
	InsecureHTTP    bool
	WebConsole      bool
	StateDir        string
	SessionTimeout  time.Duration

	// MaxConnsPerSource caps a source's connections to the Redfish
	// listener, and its requests in flight; MaxConns all sources'
	// connections together.
	MaxConnsPerSource int
	MaxConns          int

	// BMCAddresses gives every machine a BMC of its own (internal/listen);
	// BMCRedfishPort and BMCIPMIPort are where those BMCs answer, and
	// TLSCACert and TLSCAKey the CA that issues their certificates.
	BMCAddresses   []string
	BMCRedfishPort int
	BMCIPMIPort    int
	TLSCACert      string
	TLSCAKey       string

	MediaDir      string
	MediaMaxBytes int64
	MediaLocalDir string
	MediaWait     time.Duration

	BMCUpdateDowntime time.Duration
	BMCFlashTime      time.Duration

	MediaAllowLoopback bool
	// EventsAllowLoopback allows event destinations on loopback; media
	// flags never do.
	EventsAllowLoopback bool
	MediaDenyPrivate    bool
	MediaAllowCIDRs     []string
	MediaDenyCIDRs      []string
	MediaCAFile         string
	MediaInsecureTLS    bool
	MediaGroup          string

	IPMI               bool
	IPMIAddr           string
	MetricsAddr        string
	MaxStarting        int
	StartGap           time.Duration
	IPMIPortBase       int
	IPMICipher0        bool
	IPMIMaxSessions    int
	IPMISessionTimeout time.Duration
	// IPMIInband serves each machine's in-band IPMI (the KCS its OS
	// reaches as /dev/ipmi0), on a unix socket in IPMIInbandDir.
	IPMIInband    bool
	IPMIInbandDir string

	LogLevel  string
	LogFormat string

	// Faults are injected from the start (vbmcd fault changes them later).
	Faults []faultSpec

	// Personality and Quirks are the vendor BMC machines look like, and
	// the quirk switches, where a machine names none of its own.
	Personality string
	Quirks      string
	QuirkTimes  string
}

// defaultRoot is where the default --media-dir lives ("/"); a test gives
// vbmcd a fresh root of its own to see what a fresh machine does.
var defaultRoot = "/"

func (c *Config) bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.Backend, "backend", "libvirt", "machines to serve: libvirt (VMs), kubevirt (KubeVirt VirtualMachines) or sim (simulated servers)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig of the KubeVirt cluster (--backend kubevirt; default: the in-cluster configuration)")
	fs.StringSliceVar(&c.KubeNamespaces, "namespace", nil, "namespaces whose VirtualMachines get a BMC, repeatable (--backend kubevirt; default: all)")
	fs.StringVar(&c.KubeSelector, "selector", "", "label selector choosing the VirtualMachines that get a BMC (--backend kubevirt)")
	fs.StringVar(&c.KubeMediaAddr, "kubevirt-media-addr", "", "listen address (host:port) of the plain-HTTP server CDI's importer fetches inserted images from (--backend kubevirt; empty: no virtual media)")
	fs.StringVar(&c.KubeMediaURL, "kubevirt-media-url", "", "base URL at which the cluster reaches --kubevirt-media-addr, e.g. http://vbmcd.lab.svc:8081 (default: http://ADDR)")
	c.Libvirt = []virt.Host{{URI: "qemu:///system"}}
	hl := &hostList{hosts: &c.Libvirt}
	fs.Var(uriValue{hl}, "libvirt-uri", "libvirt URI, repeatable for several hosts, each optionally named NAME=URI (qemu:///system, qemu+unix:///system?socket=PATH, qemu+tcp://HOST/system, qemu+tls://HOST/system?pkipath=DIR, qemu+ssh://USER@HOST/system?keyfile=PATH)")
	fs.Var(hostValue{hl}, "libvirt", "a libvirt host as JSON {name, uri, domains}; in the config file, libvirt: is a list of them")
	_ = fs.MarkHidden("libvirt")
	fs.StringSliceVar(&c.Domains, "domains", nil, "serve only domains whose names match these shell patterns (default: all)")
	fs.StringVar(&c.Personality, "personality", string(personality.Generic), "the vendor BMC machines look like, where a machine's own setting names none: "+strings.Join(personality.Names(), ", ")+" (docs/personalities.md)")
	fs.StringVar(&c.Quirks, "quirks", "", "quirk switches for machines without their own, comma-separated: NAME turns one on, -NAME off; a personality's own are on (docs/personalities.md)")
	fs.StringVar(&c.QuirkTimes, "quirk-times", "", "the quirks' windows, NAME=DURATION comma-separated (power-on-conflict=30s, refuse-in-post=30s, stale-inserted=10s, slow-bios-patch=65s by default)")
	fs.IntVar(&c.SimNodes, "sim-nodes", 8, "number of simulated servers (--backend sim)")
	fs.DurationVar(&c.SimDelay, "sim-delay", 2*time.Second, "how long a simulated power transition takes")
	fs.StringVar(&c.SimSystems, "sim-systems", "", "the simulated servers, from a file instead of --sim-nodes alike ones: sushy-tools' fake driver configuration (SUSHY_EMULATOR_FAKE_SYSTEMS, EXTERNAL_NOTIFICATION_URL) as Python or JSON, or vbmcd's own YAML (see docs/metal3.md)")
	fs.StringVar(&c.SimNotifyURL, "sim-notify-url", "", "where the changes of simulated servers with external_notifier are PUT, as sushy-tools' fake driver does (default: the systems file's EXTERNAL_NOTIFICATION_URL, else http://localhost:9999)")
	fs.StringVar(&c.SimMedia, "sim-media", "", "how simulated servers without a media mode of their own take virtual media: fetch (download the image, as a BMC does) or probe (read its first 64 KiB, then insert it without the download) (default: the systems file's media:, else fetch)")
	fs.StringVar(&c.RedfishAddr, "redfish-addr", "127.0.0.1:8000", "Redfish listen address host:port (\":8000\" for every address; off loopback a password of your own is required)")
	fs.StringSliceVar(&c.BMCAddresses, "bmc-addresses", nil, "give every machine a BMC of its own, as real servers have: a Redfish listener serving that machine alone and its IPMI BMC, on an address from this list: ADDRESS, FIRST-LAST (IPv4 or IPv6) or MACHINE=ADDRESS (a name or UUID pinned to an address); comma-separated or repeated (default: none, one listener for all)")
	fs.IntVar(&c.BMCRedfishPort, "bmc-redfish-port", 0, "port of each machine's own Redfish listener (default: 443, or 80 with --insecure-http)")
	fs.IntVar(&c.BMCIPMIPort, "bmc-ipmi-port", 623, "UDP port of each machine's own IPMI BMC, on its --bmc-addresses address (0: no IPMI there)")
	fs.StringVar(&c.TLSCACert, "tls-ca-cert", "", "CA certificate that issues each --bmc-addresses BMC a certificate for its address, e.g. a lab's CA (default: a CA vbmcd makes once and keeps in --state-dir as bmc-ca.crt)")
	fs.StringVar(&c.TLSCAKey, "tls-ca-key", "", "the key of --tls-ca-cert (0600)")
	fs.IntVar(&c.MaxConnsPerSource, "redfish-max-conns-per-source", listen.DefaultMaxConnsPerSource, "connections one source address (IPv6: its /64) may hold open on the Redfish listeners (every --bmc-addresses BMC's included), and requests (HTTP/2 streams included) it may have in flight; over it the source's oldest idle keep-alive is closed, or else the new connection, and a request over it is answered 503 (0: no limit)")
	fs.IntVar(&c.MaxConns, "redfish-max-conns", listen.DefaultMaxConns, "connections all sources together may hold open on the Redfish listeners (every --bmc-addresses BMC's included); at it the source holding the most gives one up to a source holding fewer, or else the new connection is closed (0: no limit)")
	fs.StringVar(&c.Username, "username", "admin", "the service-wide BMC user (Redfish and IPMI)")
	fs.StringVar(&c.Password, "password", DefaultPassword, "the service-wide BMC password (visible to every local user in the process list: prefer --credentials-file or VBMCD_PASSWORD)")
	fs.StringVar(&c.CredentialsFile, "credentials-file", "", "YAML file with username: and password: (instead of --username/--password)")
	fs.StringVar(&c.HtpasswdFile, "htpasswd-file", "", "Redfish users from an htpasswd file of bcrypt entries (htpasswd -B), each a service-wide Administrator, as sushy-tools reads SUSHY_EMULATOR_AUTH_FILE; not IPMI users (no password to make a key from); with it the built-in password is not served")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "TLS certificate for Redfish (default: a self-signed one kept in --state-dir)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "TLS key for --tls-cert")
	fs.StringSliceVar(&c.TLSSANs, "tls-san", nil, "names and addresses the self-signed certificate is for, besides the listen address, loopback and the host name")
	fs.StringVar(&c.TLSMinVersion, "tls-min-version", "1.2", "lowest TLS version Redfish accepts: 1.2 or 1.3")
	fs.StringSliceVar(&c.TLSCipherSuites, "tls-cipher-suites", nil, "TLS 1.2 cipher suites Redfish offers, IANA names, comma-separated (default: every forward-secret AEAD suite; "+strings.Join(redfish.TLSSuiteNames(), ", ")+")")
	fs.BoolVar(&c.InsecureHTTP, "insecure-http", false, "serve Redfish over plain HTTP")
	fs.BoolVar(&c.WebConsole, "web-console", true, "serve the web console (a browser's view of the machines, with their serial consoles) at / on the Redfish listener")
	fs.StringVar(&c.StateDir, "state-dir", "/var/lib/vbmcd", "where vbmcd keeps its TLS certificate and service UUID")
	fs.DurationVar(&c.SessionTimeout, "session-timeout", 30*time.Minute, "idle timeout of Redfish sessions")
	fs.StringVar(&c.MediaDir, "media-dir", filepath.Join(defaultRoot, "var/lib/bmlab/media"), "virtual media image cache (qemu must be able to read it)")
	fs.Int64Var(&c.MediaMaxBytes, "media-max-bytes", 20<<30, "size bound of the image cache; least recently used images no VM holds are evicted")
	fs.StringVar(&c.MediaLocalDir, "media-local-dir", "", "allow virtual media images given as local paths inside this directory (default: refused)")
	fs.DurationVar(&c.MediaWait, "media-wait", 2*time.Minute, "how long a power-on waits for virtual media that is still downloading")
	fs.DurationVar(&c.BMCUpdateDowntime, "bmc-update-downtime", time.Minute, "how long a BMC answers nothing after a firmware update of it (its reboot)")
	fs.DurationVar(&c.BMCFlashTime, "bmc-flash-time", 2*time.Second, "how long a BMC flashes a checked image of its own firmware, answering, before it reboots")
	fs.BoolVar(&c.MediaAllowLoopback, "media-allow-loopback", false, "allow virtual media and firmware images on loopback addresses (an image server on this host)")
	fs.BoolVar(&c.EventsAllowLoopback, "events-allow-loopback", false, "allow event destinations on loopback addresses (an event listener on this host); --media-allow-loopback and --media-allow-cidr do not")
	fs.BoolVar(&c.MediaDenyPrivate, "media-deny-private", false, "refuse virtual media images and event destinations on private addresses (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) too")
	fs.StringSliceVar(&c.MediaAllowCIDRs, "media-allow-cidr", nil, "allow virtual media images and event destinations in these ranges whatever else says (except --media-deny-cidr)")
	fs.StringSliceVar(&c.MediaDenyCIDRs, "media-deny-cidr", nil, "refuse virtual media images and event destinations in these ranges")
	fs.StringVar(&c.MediaCAFile, "media-ca-file", "", "PEM bundle trusted for HTTPS image servers, with the system's roots")
	fs.BoolVar(&c.MediaInsecureTLS, "media-insecure-tls", false, "never verify image servers' certificates (whatever VerifyCertificate says)")
	fs.StringVar(&c.MediaGroup, "media-group", "", "group qemu reads images as (default: libvirt-qemu, else kvm)")
	fs.BoolVar(&c.IPMI, "ipmi", true, "serve IPMI lanplus BMCs for machines that have an IPMI endpoint")
	fs.IntVar(&c.MaxStarting, "max-starting", 0, "machines that may start at once; further power-ons are answered at once and queued (0: no limit)")
	fs.DurationVar(&c.StartGap, "start-gap", 0, "least time from one machine's start finishing to the next one's beginning (with --max-starting, or alone)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "Prometheus /metrics listen address, e.g. 127.0.0.1:9120; unauthenticated (default: none)")
	fs.StringVar(&c.IPMIAddr, "ipmi-addr", "", "address IPMI BMCs bind when their endpoint names none (default: --redfish-addr's host)")
	fs.IntVar(&c.IPMIPortBase, "ipmi-port-base", 0, "give every machine without an IPMI endpoint the lowest free port from here on (0: off)")
	fs.BoolVar(&c.IPMICipher0, "ipmi-cipher0", false, "accept IPMI cipher suite 0 (no authentication at all)")
	fs.IntVar(&c.IPMIMaxSessions, "ipmi-max-sessions", 16, "IPMI sessions per BMC")
	fs.DurationVar(&c.IPMISessionTimeout, "ipmi-session-timeout", 60*time.Second, "idle timeout of IPMI sessions")
	fs.BoolVar(&c.IPMIInband, "ipmi-inband", true, "serve each machine's in-band IPMI: the KCS interface its OS reaches as /dev/ipmi0, wired by qemu to a unix socket of this BMC (libvirt domains without one get it at their next power-on through vbmcd)")
	fs.StringVar(&c.IPMIInbandDir, "ipmi-inband-dir", "", "directory of the in-band IPMI sockets, <uuid>.sock (default: "+DefaultInbandDir+" with --backend libvirt; with --backend sim none, give one to serve synthetic clients)")
	fs.Var(&faultList{specs: &c.Faults}, "fault", `inject faults from the start, repeatable: {"machine":"NAME","latency":"300ms","httpErrors":2,"httpStatus":503,"ipmiDrop":1,"refusePowerOn":true,"mediaStuck":true,"down":"30s"} (see vbmcd fault set)`)
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "console", "console or json")
}

// DefaultInbandDir holds the in-band IPMI sockets of libvirt domains.
const DefaultInbandDir = virt.DefaultKCSDir

// inbandDir is where the machines' in-band IPMI sockets go; "" when vbmcd
// makes none (the sockets libvirt domains name are still served).
func (c Config) inbandDir() string {
	switch {
	case !c.IPMI || !c.IPMIInband:
		return ""
	case c.IPMIInbandDir != "":
		return c.IPMIInbandDir
	case c.Backend == "libvirt":
		return DefaultInbandDir
	}
	return ""
}

// EnvName is the environment variable of a flag.
func EnvName(flag string) string {
	return "VBMCD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fill sets every flag the command line did not set from the environment,
// then from the config file.
func fill(fs *pflag.FlagSet, file string, getenv func(string) string) error {
	values := map[string]any{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		if err := yaml.UnmarshalStrict(b, &values); err != nil {
			return fmt.Errorf("config file %s: %w", file, err)
		}
		for k := range values {
			if f := fs.Lookup(k); f == nil || k == "config" {
				return fmt.Errorf("config file %s: unknown setting %q (settings are the flags' names, see vbmcd --help)", file, k)
			}
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "config" || f.Name == "help" {
			return
		}
		if v := getenv(EnvName(f.Name)); v != "" {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", EnvName(f.Name), v, serr)
			}
			return
		}
		v, ok := values[f.Name]
		if !ok {
			return
		}
		for _, s := range flagStrings(v) {
			if serr := f.Value.Set(s); serr != nil {
				err = fmt.Errorf("config file %s: %s: %w", file, f.Name, serr)
				return
			}
		}
	})
	return err
}

// flagStrings turns a YAML value into the strings a flag parses; a list
// becomes one Set per item (string slices append).
func flagStrings(v any) []string {
	switch x := v.(type) {
	case []any:
		var out []string
		for _, i := range x {
			if m, ok := i.(map[string]any); ok {
				b, _ := json.Marshal(m) // a list of objects (libvirt:): one JSON object per Set
				out = append(out, string(b))
				continue
			}
			out = append(out, fmt.Sprint(i))
		}
		return out
	case map[string]any:
		// A map is a list of KEY=VALUE items (bmc-addresses: {master-0: 10.0.0.5}).
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = k + "=" + fmt.Sprint(x[k])
		}
		return out
	case float64:
		if x == float64(int64(x)) {
			return []string{fmt.Sprint(int64(x))}
		}
	}
	return []string{fmt.Sprint(v)}
}

// credentials reads the credentials file when one is given.
func (c *Config) credentials() (user, pass string, err error) {
	if c.CredentialsFile == "" {
		return c.Username, c.Password, nil
	}
	b, err := os.ReadFile(c.CredentialsFile)
	if err != nil {
		return "", "", fmt.Errorf("credentials file: %w", err)
	}
	// As ssh does with keys: a password others may read is not used.
	if fi, err := os.Stat(c.CredentialsFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return "", "", fmt.Errorf("credentials file %s is readable by other users (mode %04o); run: chmod 600 %s",
			c.CredentialsFile, fi.Mode().Perm(), c.CredentialsFile)
	}
	var f struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return "", "", fmt.Errorf("credentials file %s: %w (want username: and password:)", c.CredentialsFile, err)
	}
	if f.Username == "" || f.Password == "" {
		return "", "", fmt.Errorf("credentials file %s: username and password must both be set", c.CredentialsFile)
	}
	return f.Username, f.Password, nil
}

// DefaultPassword is the built-in password, accepted on loopback only.
const DefaultPassword = "password"

// checkPassword refuses an empty password anywhere, and the built-in one
// on a listener that every network may reach (every address, or a public
// one). On a private address (a lab's own network, where labctl puts BMCs)
// the built-in one is only warned about: see warnings.
func (c *Config) checkPassword(pass string) error {
	if pass == "" {
		return fmt.Errorf("the BMC password is empty; set one with --credentials-file (a 0600 YAML file with username: and password:) or VBMCD_PASSWORD")
	}
	if pass != DefaultPassword {
		return nil
	}
	for _, l := range c.listeners() {
		if reach(l.addr) == reachAll {
			return fmt.Errorf("%s %q is reachable from any network and the BMC password is the built-in one; set your own with --credentials-file (a 0600 YAML file with username: and password:) or VBMCD_PASSWORD, or listen on 127.0.0.1 or a private address", l.flag, l.addr)
		}
	}
	return nil
}

type listener struct{ flag, addr string }

// listeners are the addresses the daemon listens on by default.
func (c *Config) listeners() []listener {
	ls := []listener{{"--redfish-addr", c.RedfishAddr}}
	if c.IPMI {
		ls = append(ls, listener{"--ipmi-addr", c.ipmiAddr()})
	}
	if p, err := listen.ParsePool(c.BMCAddresses); err == nil && p != nil {
		for _, a := range p.Addrs() {
			ls = append(ls, listener{"--bmc-addresses", a.String()})
		}
	}
	return ls
}

type reachability int

const (
	reachLocal   reachability = iota // loopback
	reachPrivate                     // a private address: the lab's networks
	reachAll                         // every address, or a public one
)

// reach says who can reach a listener on addr (host or host:port).
func reach(addr string) reachability {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if host == "localhost" {
		return reachLocal
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil || ip.IsUnspecified():
		return reachAll // "", a name (may resolve anywhere), 0.0.0.0, ::
	case ip.IsLoopback():
		return reachLocal
	case ip.IsPrivate() || ip.IsLinkLocalUnicast():
		return reachPrivate
	}
	return reachAll
}

// ipmiAddr is the address IPMI BMCs bind when their endpoint names none:
// --ipmi-addr, else the Redfish listener's host ("" when that is every
// address).
// An IPv6 --ipmi-addr may come in brackets, as in a URL ([fd00::1]).
func (c *Config) ipmiAddr() string {
	if c.IPMIAddr != "" {
		return strings.TrimSuffix(strings.TrimPrefix(c.IPMIAddr, "["), "]")
	}
	host, _, err := net.SplitHostPort(c.RedfishAddr)
	if err != nil {
		return ""
	}
	return host
}

// warnings are the settings an operator must know are unsafe; passwordFlag
// says --password was given on the command line, builtin that the password
// is the built-in one.
func (c *Config) warnings(passwordFlag, builtin bool) []string {
	var w []string
	if builtin {
		for _, l := range c.listeners() {
			if reach(l.addr) != reachLocal {
				w = append(w, fmt.Sprintf("%s %q is reachable from other machines and the BMC password is the built-in one; set your own with --credentials-file", l.flag, l.addr))
			}
		}
	}
	if c.InsecureHTTP {
		w = append(w, "--insecure-http: Redfish credentials and session tokens cross the network in clear text")
	}
	if c.IPMI && c.IPMICipher0 {
		w = append(w, "--ipmi-cipher0: IPMI cipher suite 0 is on; anyone who can reach an IPMI port controls its machine as an administrator, with no password")
	}
	if c.MetricsAddr != "" && reach(c.MetricsAddr) != reachLocal {
		w = append(w, fmt.Sprintf("--metrics-addr %q is reachable from other machines and /metrics has no authentication", c.MetricsAddr))
	}
	if passwordFlag {
		w = append(w, "--password on the command line is visible to every local user (/proc/*/cmdline); use --credentials-file or VBMCD_PASSWORD")
	}
	return w
}

func (c *Config) validate() error {
	switch c.Backend {
	case "libvirt", "sim", "kubevirt":
	default:
		return fmt.Errorf("--backend %q: use libvirt, kubevirt or sim", c.Backend)
	}
	if _, err := personality.Lookup(c.Personality); err != nil {
		return fmt.Errorf("--personality: %w", err)
	}
	if d := c.IPMIInbandDir; d != "" {
		// A unix socket's path holds 107 bytes: <dir>/<36-byte uuid>.sock.
		if !filepath.IsAbs(d) {
			return fmt.Errorf("--ipmi-inband-dir %q: must be an absolute path (qemu connects to the sockets in it)", d)
		}
		if n := len(filepath.Clean(d)) + 42; n > 107 {
			return fmt.Errorf("--ipmi-inband-dir %q: the sockets' paths would be %d bytes, over a unix socket's 107; choose a shorter directory, such as %s", d, n, DefaultInbandDir)
		}
		if c.Backend == "kubevirt" {
			return fmt.Errorf("--ipmi-inband-dir: KubeVirt's VirtualMachines have no in-band IPMI (docs/kubevirt.md); leave it out with --backend kubevirt")
		}
	}
	if _, err := personality.ParseQuirks(c.Quirks); err != nil {
		return fmt.Errorf("--quirks: %w", err)
	}
	if _, err := redfish.ParseQuirkTimes(c.QuirkTimes); err != nil {
		return fmt.Errorf("--quirk-times: %w", err)
	}
	if c.MaxStarting < 0 || c.StartGap < 0 {
		return fmt.Errorf("--max-starting %d, --start-gap %v: neither may be negative (0 means no limit)", c.MaxStarting, c.StartGap)
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("--redfish-max-conns %d: want a number of connections, or 0 for no limit", c.MaxConns)
	}
	if c.MaxConnsPerSource < 0 {
		return fmt.Errorf("--redfish-max-conns-per-source %d: want a number of connections, or 0 for no limit", c.MaxConnsPerSource)
	}
	if c.KubeMediaURL != "" {
		u, err := url.Parse(c.KubeMediaURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--kubevirt-media-url %q: must be an http:// or https:// URL with a host (how CDI's importer pods reach --kubevirt-media-addr)", c.KubeMediaURL)
		}
		if c.KubeMediaAddr == "" {
			return fmt.Errorf("--kubevirt-media-url needs --kubevirt-media-addr, the address the image server listens on")
		}
	}
	if c.Backend == "sim" && c.SimNodes < 1 {
		return fmt.Errorf("--sim-nodes %d: the sim backend needs at least one node", c.SimNodes)
	}
	if c.SimMedia != "" && c.SimMedia != string(sim.MediaFetch) && c.SimMedia != string(sim.MediaProbe) {
		return fmt.Errorf("--sim-media %q: use fetch (download each image) or probe (read its first 64 KiB only)", c.SimMedia)
	}
	if c.SimNotifyURL != "" {
		if u, err := url.Parse(c.SimNotifyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--sim-notify-url %q: want an http:// or https:// URL with a host, such as http://127.0.0.1:9999", c.SimNotifyURL)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if c.InsecureHTTP && c.TLSCert != "" {
		return fmt.Errorf("--insecure-http and --tls-cert contradict each other; drop one")
	}
	if err := redfish.ApplyTLSPolicy(&tls.Config{}, c.TLSMinVersion, c.TLSCipherSuites); err != nil {
		return fmt.Errorf("--tls-min-version %q, --tls-cipher-suites %v: %w", c.TLSMinVersion, c.TLSCipherSuites, err)
	}
	if c.MediaMaxBytes <= 0 {
		return fmt.Errorf("--media-max-bytes %d: want a positive size in bytes", c.MediaMaxBytes)
	}
	if _, err := c.mediaPolicy(); err != nil {
		return err
	}
	if _, err := c.libvirtHosts(); err != nil {
		return err
	}
	if a := c.ipmiAddr(); c.IPMIAddr != "" && net.ParseIP(a) == nil {
		return fmt.Errorf("--ipmi-addr %q: want an IP address (IPv6 with or without brackets: fd00::1 or [fd00::1]), no port: each BMC has its own", c.IPMIAddr)
	}
	if c.IPMIPortBase < 0 || c.IPMIPortBase > 65535 {
		return fmt.Errorf("--ipmi-port-base %d: want a UDP port (1-65535) or 0 for off", c.IPMIPortBase)
	}
	return c.validateBMCs()
}

// validateBMCs checks --bmc-addresses and the flags that go with it.
func (c *Config) validateBMCs() error {
	pool, err := listen.ParsePool(c.BMCAddresses)
	if err != nil {
		return err
	}
	if c.BMCRedfishPort < 0 || c.BMCRedfishPort > 65535 {
		return fmt.Errorf("--bmc-redfish-port %d: want a TCP port (1-65535), or 0 for 443 (80 with --insecure-http)", c.BMCRedfishPort)
	}
	if c.BMCIPMIPort < 0 || c.BMCIPMIPort > 65535 {
		return fmt.Errorf("--bmc-ipmi-port %d: want a UDP port (1-65535), or 0 for no IPMI on the BMCs' addresses", c.BMCIPMIPort)
	}
	if (c.TLSCACert == "") != (c.TLSCAKey == "") {
		return fmt.Errorf("--tls-ca-cert and --tls-ca-key go together")
	}
	if c.InsecureHTTP && c.TLSCACert != "" {
		return fmt.Errorf("--insecure-http and --tls-ca-cert contradict each other; drop one")
	}
	if pool == nil {
		return nil
	}
	if c.IPMIPortBase > 0 && c.IPMI && c.BMCIPMIPort > 0 {
		return fmt.Errorf("--ipmi-port-base and --bmc-addresses both place IPMI BMCs; with --bmc-addresses each machine's IPMI BMC is on its own address at --bmc-ipmi-port (%d), so drop --ipmi-port-base", c.BMCIPMIPort)
	}
	if host, port, err := net.SplitHostPort(c.RedfishAddr); err == nil && port == strconv.Itoa(c.bmcRedfishPort()) {
		if a, err := netip.ParseAddr(host); host == "" || (err == nil && (a.IsUnspecified() || pool.InRange(a.Unmap()) || pool.Pinned(a.Unmap()))) {
			return fmt.Errorf("--redfish-addr %q and the BMCs' port %d collide; give the service listener another port or address, or choose --bmc-redfish-port", c.RedfishAddr, c.bmcRedfishPort())
		}
	}
	return nil
}

// bmcPool is --bmc-addresses, nil when not given (checked by validate).
func (c *Config) bmcPool() *listen.Pool {
	p, _ := listen.ParsePool(c.BMCAddresses)
	return p
}

// bmcRedfishPort is where each machine's own Redfish listener listens.
func (c *Config) bmcRedfishPort() int {
	switch {
	case c.BMCRedfishPort > 0:
		return c.BMCRedfishPort
	case c.InsecureHTTP:
		return 80
	}
	return 443
}

// mediaPolicy is vbmcd's outbound address policy: the virtual media
// fetcher's and the event deliveries' (internal/netpolicy).
func (c *Config) mediaPolicy() (media.Policy, error) {
	p := media.Policy{AllowLoopback: c.MediaAllowLoopback, DenyPrivate: c.MediaDenyPrivate}
	for _, l := range []struct {
		flag  string
		cidrs []string
		dst   *[]netip.Prefix
	}{{"--media-allow-cidr", c.MediaAllowCIDRs, &p.Allow}, {"--media-deny-cidr", c.MediaDenyCIDRs, &p.Deny}} {
		for _, s := range l.cidrs {
			pf, err := netip.ParsePrefix(s)
			if err != nil {
				return p, fmt.Errorf("%s %q: want a range such as 192.168.10.0/24 or fd00::/64", l.flag, s)
			}
			*l.dst = append(*l.dst, pf.Masked())
		}
	}
	return p, nil
}

// Names of the BMC CA vbmcd makes when none is given.
const (
	bmcCACert = "bmc-ca.crt"
	bmcCAKey  = "bmc-ca.key"
)

// bmcCA is the CA that issues machines' own BMCs their certificates:
// --tls-ca-cert and --tls-ca-key, else one made once in --state-dir.
func (c *Config) bmcCA() (*pki.CA, error) {
	if c.TLSCACert != "" {
		ca, err := pki.LoadCA(c.TLSCACert, c.TLSCAKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca-cert: %w", err)
		}
		return ca, nil
	}
	ca, err := pki.EnsureCA(filepath.Join(c.StateDir, bmcCACert), filepath.Join(c.StateDir, bmcCAKey), "vbmcd BMC CA", time.Now())
	if err != nil {
		return nil, fmt.Errorf("the BMCs' CA in --state-dir: %w", err)
	}
	return ca, nil
}
