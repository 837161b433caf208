package simfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

// Forms of a systems file.
const (
	FormVbmcd       = "vbmcd"              // vbmcd's own YAML (or JSON): systems:, notifier:, media:
	FormSushyConfig = "sushy-tools config" // the emulator's Python configuration file
	FormSushyJSON   = "sushy-tools JSON"   // the fake systems list as JSON, or the config's settings as a JSON object
)

// The settings of sushy-tools' configuration that vbmcd reads.
const (
	keySystems  = "SUSHY_EMULATOR_FAKE_SYSTEMS"
	keyURL      = "EXTERNAL_NOTIFICATION_URL"
	keyCAFile   = "EXTERNAL_NOTIFICATION_CAFILE"
	keyCertFile = "EXTERNAL_NOTIFICATION_CERTFILE"
	keyKeyFile  = "EXTERNAL_NOTIFICATION_KEYFILE"
)

// DefaultNotificationURL is the fake driver's EXTERNAL_NOTIFICATION_URL
// when the configuration sets none.
const DefaultNotificationURL = "http://localhost:9999"

// Bounds of a systems file.
const (
	MaxFileBytes = 64 << 20
	MaxSystems   = 100_000
	maxProblems  = 20 // problems listed in one error
)

// File is a systems file, read and checked.
type File struct {
	Form    string
	Systems []sim.System
	// Notifier is where the announcements of the systems that ask for
	// them go (sushy-tools' EXTERNAL_NOTIFICATION_*).
	Notifier Notifier
	// Media is the file's media mode for systems without one of their
	// own; "" when it says none.
	Media sim.MediaMode
	// Ignored lists the settings of a sushy-tools configuration that vbmcd
	// does not take from the file, each with what does the same in vbmcd.
	Ignored []string
}

// Notifier says where announcements go and how they are sent.
type Notifier struct {
	URL      string
	CAFile   string // verify the listener's certificate with this CA
	CertFile string // a client certificate, with KeyFile
	KeyFile  string
}

// Error lists what is wrong with a file, each problem naming the entry
// and the field.
type Error struct {
	File     string
	Form     string
	Problems []string
	More     int // problems beyond those listed
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "systems file %s (%s):", e.File, e.Form)
	for _, p := range e.Problems {
		b.WriteString("\n  " + p)
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n  and %d more", e.More)
	}
	return b.String()
}

// Load reads and checks a systems file.
func Load(path string) (*File, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("systems file: %w", err)
	}
	return Parse(path, data)
}

// readBounded reads a file of at most MaxFileBytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB", path, MaxFileBytes>>20)
	}
	return data, nil
}

// Parse reads a systems file's bytes; name is how errors call it.
//
// The form is told from the first line that is neither blank nor a
// comment: [ or { starts JSON (sushy-tools' fake systems list, a JSON
// object of its settings, or vbmcd's form as JSON); NAME = or an import
// starts sushy-tools' Python configuration; anything else is vbmcd's YAML.
func Parse(name string, data []byte) (*File, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	first := firstLine(data)
	switch {
	case strings.HasPrefix(first, "["):
		var list any
		if err := decodeJSON(data, &list); err != nil {
			return nil, fmt.Errorf("systems file %s (%s): %w", name, FormSushyJSON, err)
		}
		return sushy(name, FormSushyJSON, map[string]any{keySystems: list}, nil)
	case strings.HasPrefix(first, "{"):
		var obj map[string]any
		if err := decodeJSON(data, &obj); err != nil {
			return nil, fmt.Errorf("systems file %s (JSON): %w", name, err)
		}
		if _, ok := obj["systems"]; ok {
			return vbmcdForm(name, obj)
		}
		var others []string
		for k := range obj {
			others = append(others, k)
		}
		slices.Sort(others)
		return sushy(name, FormSushyJSON, obj, others)
	case pyStart.MatchString(first):
		values, _, others, err := pyAssignments(data, keySystems, keyURL, keyCAFile, keyCertFile, keyKeyFile)
		if err != nil {
			return nil, fmt.Errorf("systems file %s (%s): %w", name, FormSushyConfig, err)
		}
		return sushy(name, FormSushyConfig, values, others)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("systems file %s (%s YAML): %w", name, FormVbmcd, err)
	}
	var obj map[string]any
	if err := decodeJSON(j, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("systems file %s: neither vbmcd's YAML (systems: and a list), nor JSON, nor sushy-tools' configuration (SUSHY_EMULATOR_FAKE_SYSTEMS = [...])", name)
	}
	return vbmcdForm(name, obj)
}

// SushySettings reads the literal values a sushy-tools configuration (its
// Python file, or the same as a JSON object) gives to names; a name it
// does not set is absent from the result, one it sets to None is nil.
func SushySettings(path string, names ...string) (map[string]any, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("sushy-tools configuration: %w", err)
	}
	first := firstLine(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	out := map[string]any{}
	switch {
	case strings.HasPrefix(first, "{"):
		var obj map[string]any
		if err := decodeJSON(data, &obj); err != nil {
			return nil, fmt.Errorf("sushy-tools configuration %s (JSON): %w", path, err)
		}
		for _, n := range names {
			if v, ok := obj[n]; ok {
				out[n] = v
			}
		}
	case pyStart.MatchString(first) || first == "":
		values, _, _, err := pyAssignments(data, names...)
		if err != nil {
			return nil, fmt.Errorf("sushy-tools configuration %s: %w", path, err)
		}
		out = values
	default:
		return nil, fmt.Errorf("%s is not a sushy-tools configuration (Python assignments such as SUSHY_EMULATOR_LISTEN_PORT = 8000, or a JSON object of them)", path)
	}
	return out, nil
}

// pyStart is the first line of a Python configuration: an assignment, an
// import.
var pyStart = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*\s*(=[^=]|:[^=]*=)|(import|from|if|for|while|def|class|try|with)\s)`)

func firstLine(data []byte) string {
	for line := range bytes.Lines(data) { // one at a time: a file may hold millions
		l := string(bytes.TrimSpace(line))
		if l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return l
		}
	}
	return ""
}

func decodeJSON(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return fmt.Errorf("line %d: %v", line, err)
		}
		return err
	}
	if d.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

// checker collects problems.
type checker struct {
	problems []string
	more     int
}

func (c *checker) add(format string, args ...any) {
	if len(c.problems) < maxProblems {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	} else {
		c.more++
	}
}

func (c *checker) err(file, form string) error {
	if len(c.problems) == 0 {
		return nil
	}
	return &Error{File: file, Form: form, Problems: c.problems, More: c.more}
}

// obj reads the fields of one object of the file, naming it in problems.
type obj struct {
	c     *checker
	where string
	m     map[string]any
}

// kind names a value's type as the file's author wrote it.
func kind(v any) string {
	switch x := v.(type) {
	case nil:
		return "None/null"
	case string:
		return fmt.Sprintf("the string %q", short(x))
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case float64, int64:
		return fmt.Sprintf("the number %v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "a dict"
	}
	return fmt.Sprintf("%T", v)
}

func short(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}

func (o obj) str(key string, required bool) (string, bool) {
	v, ok := o.m[key]
	if !ok {
		if required {
			o.c.add("%s: %s is missing", o.where, key)
		}
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		o.c.add("%s: %s is %s; want a string", o.where, key, kind(v))
		return "", false
	}
	return s, true
}

func (o obj) boolean(key string) (bool, bool) {
	v, ok := o.m[key]
	if !ok {
		return false, false
	}
	b, isBool := v.(bool)
	if !isBool {
		o.c.add("%s: %s is %s; want True or False (JSON, YAML: true or false)", o.where, key, kind(v))
		return false, false
	}
	return b, true
}

func (o obj) list(key string, required bool) ([]any, bool) {
	v, ok := o.m[key]
	if !ok {
		if required {
			o.c.add("%s: %s is missing", o.where, key)
		}
		return nil, false
	}
	l, isList := v.([]any)
	if !isList {
		o.c.add("%s: %s is %s; want a list", o.where, key, kind(v))
		return nil, false
	}
	return l, true
}

func (o obj) dict(key string) (map[string]any, bool) {
	v, ok := o.m[key]
	if !ok {
		return nil, false
	}
	d, isDict := v.(map[string]any)
	if !isDict {
		o.c.add("%s: %s is %s; want a dict of names and values", o.where, key, kind(v))
		return nil, false
	}
	return d, true
}

func (o obj) number(key string) (float64, bool) {
	v, ok := o.m[key]
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	}
	o.c.add("%s: %s is %s; want a number", o.where, key, kind(v))
	return 0, false
}

// only refuses keys other than known (vbmcd's form: a misspelt key is an
// error, not a default).
func (o obj) only(known ...string) {
	var extra []string
	for k := range o.m {
		if !slices.Contains(known, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	for _, k := range extra {
		o.c.add("%s: unknown key %q (known: %s)", o.where, k, strings.Join(known, ", "))
	}
}

var (
	uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	macRe  = regexp.MustCompile(`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$`)
)

// checkName: a name is how Redfish URLs and Ironic's node names reach a
// machine, so it has no slash and no control characters.
func checkName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > 255:
		return "is longer than 255 bytes"
	case strings.ContainsAny(name, "/?#"):
		return "has a / ? or #, which a Redfish URL cannot carry"
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return "has a space or a control character"
	}
	return ""
}

// unique remembers who has a name, a UUID or a MAC.
type unique map[string]string

func (u unique) claim(c *checker, what, value, who string) {
	key := what + "\x00" + strings.ToLower(value)
	if prev, ok := u[key]; ok {
		c.add("%s: %s %s is also %s's; each must be unique", who, what, value, prev)
		return
	}
	u[key] = who
}

func checkURL(c *checker, where, u string) {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		c.add("%s %q: want an http:// or https:// URL with a host, such as %s", where, short(u), DefaultNotificationURL)
	}
}

// bootSource checks a boot device name (Redfish's BootSourceOverrideTarget
// values, as the fake driver keeps them).
func bootSource(c *checker, where, v string) machine.BootSource {
	if !slices.Contains(machine.BootSources, machine.BootSource(v)) {
		c.add("%s %q: want one of %v", where, v, machine.BootSources)
		return ""
	}
	return machine.BootSource(v)
}

func bootMode(c *checker, where, v string) machine.BootMode {
	if !slices.Contains(machine.BootModes, machine.BootMode(v)) {
		c.add("%s %q: want UEFI or Legacy", where, v)
		return ""
	}
	return machine.BootMode(v)
}

func power(c *checker, where, v string) machine.PowerState {
	if v != string(machine.PowerOn) && v != string(machine.PowerOff) {
		c.add("%s %q: want On or Off", where, v)
		return ""
	}
	return machine.PowerState(v)
}

func mediaMode(c *checker, where, v string) sim.MediaMode {
	if v != string(sim.MediaFetch) && v != string(sim.MediaProbe) {
		c.add("%s %q: want fetch (download each image, as a BMC does) or probe (read its first bytes only)", where, v)
		return ""
	}
	return sim.MediaMode(v)
}

func checkIP(c *checker, where, v string) {
	if net.ParseIP(v) == nil {
		c.add("%s %q: want an IPv4 or IPv6 address", where, short(v))
	}
}

// sizeRe is a size: bytes, or a number with a binary unit.
var sizeRe = regexp.MustCompile(`^([0-9]+)\s*(Ki|Mi|Gi|Ti)?B?$`)

// size reads a size in bytes: a number, or a string such as 8Gi or 120GiB.
func (o obj) size(key string) (int64, bool) {
	v, ok := o.m[key]
	if !ok {
		return 0, false
	}
	bad := func() (int64, bool) {
		o.c.add("%s: %s is %s; want a size in bytes, or with Ki, Mi, Gi or Ti (8Gi, 120GiB)", o.where, key, kind(v))
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		if x <= 0 || x != float64(int64(x)) {
			return bad()
		}
		return int64(x), true
	case string:
		m := sizeRe.FindStringSubmatch(strings.TrimSpace(x))
		if m == nil {
			return bad()
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		shift := map[string]uint{"": 0, "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[m[2]]
		if err != nil || n <= 0 || n > (1<<62)>>shift {
			return bad()
		}
		return n << shift, true
	}
	return bad()
}

// ignored says what does the same in vbmcd for a sushy-tools setting vbmcd
// does not take from the file; "" for settings not worth a word.
func ignored(name string) string {
	hints := map[string]string{
		"SUSHY_EMULATOR_LISTEN_IP":          "vbmcd --redfish-addr",
		"SUSHY_EMULATOR_LISTEN_PORT":        "vbmcd --redfish-addr",
		"SUSHY_EMULATOR_SSL_CERT":           "vbmcd --tls-cert",
		"SUSHY_EMULATOR_SSL_KEY":            "vbmcd --tls-key",
		"SUSHY_EMULATOR_AUTH_FILE":          "vbmcd --credentials-file, or accounts made over AccountService",
		"SUSHY_EMULATOR_FAKE_DRIVER":        "vbmcd --backend sim --sim-systems",
		"SUSHY_EMULATOR_STATE_DIR":          "vbmcd --state-dir",
		"SUSHY_EMULATOR_VMEDIA_VERIFY_SSL":  "each virtual media member's VerifyCertificate (on by default), --media-ca-file, --media-insecure-tls",
		"SUSHY_EMULATOR_LIBVIRT_URI":        "vbmcd --backend libvirt --libvirt-uri",
		"SUSHY_EMULATOR_ALLOWED_INSTANCES":  "vbmcd --domains (libvirt)",
		"SUSHY_EMULATOR_FEATURE_SET":        "none: vbmcd serves every feature",
		"SUSHY_EMULATOR_IGNORE_BOOT_DEVICE": "none: vbmcd keeps the boot device",
		"SUSHY_EMULATOR_OS_CLOUD":           "none: no OpenStack driver",
		"SUSHY_EMULATOR_IRONIC_CLOUD":       "none: no Ironic driver",
		"SUSHY_EMULATOR_NO_MEMOIZE":         "none: vbmcd keeps simulated machines in memory",
	}
	if h, ok := hints[name]; ok {
		return name + " (" + h + ")"
	}
	if strings.HasPrefix(name, "SUSHY_EMULATOR_") {
		return name
	}
	return ""
}

// sushy reads sushy-tools' settings: the fake systems and the notifier.
func sushy(name, form string, values map[string]any, others []string) (*File, error) {
	c := &checker{}
	f := &File{Form: form, Notifier: Notifier{URL: DefaultNotificationURL}}
	top := obj{c: c, where: "setting", m: values}
	if u, ok := top.str(keyURL, false); ok {
		checkURL(c, keyURL, u)
		f.Notifier.URL = u
	}
	f.Notifier.CAFile, _ = top.str(keyCAFile, false)
	f.Notifier.CertFile, _ = top.str(keyCertFile, false)
	f.Notifier.KeyFile, _ = top.str(keyKeyFile, false)
	if (f.Notifier.CertFile == "") != (f.Notifier.KeyFile == "") {
		c.add("%s and %s go together (a client certificate and its key)", keyCertFile, keyKeyFile)
	}
	for _, o := range others {
		if h := ignored(o); h != "" && o != keySystems && !strings.HasPrefix(o, "EXTERNAL_NOTIFICATION_") {
			f.Ignored = append(f.Ignored, h)
		}
	}
	list, ok := values[keySystems]
	if !ok {
		c.add("no %s: vbmcd needs the list of fake systems (sushy-tools would serve one system named fake)", keySystems)
		return nil, c.err(name, form)
	}
	entries, isList := list.([]any)
	if !isList {
		c.add("%s is %s; want a list of systems", keySystems, kind(list))
		return nil, c.err(name, form)
	}
	if len(entries) == 0 || len(entries) > MaxSystems {
		c.add("%s has %d systems; want 1 to %d", keySystems, len(entries), MaxSystems)
		return nil, c.err(name, form)
	}
	seen := unique{}
	for i, e := range entries {
		if s, ok := fakeSystem(c, seen, i, e); ok {
			f.Systems = append(f.Systems, s)
		}
	}
	return f, c.err(name, form)
}

// fakeSystem reads one entry of SUSHY_EMULATOR_FAKE_SYSTEMS, as
// sushy-tools' fake driver reads it: uuid, name and power_state are
// required, nics is a list of {mac, ip}; external_notifier, boot_device,
// boot_mode and secure_boot may give the state at the start. Other keys are
// kept, and sent back in the announcements as the fake driver does.
func fakeSystem(c *checker, seen unique, i int, e any) (sim.System, bool) {
	o, ok := entry(c, fmt.Sprintf("%s entry %d", keySystems, i+1), e, "a dict with uuid, name, power_state and nics")
	if !ok {
		return sim.System{}, false
	}
	where, m := o.where, o.m
	before := len(c.problems) + c.more
	s := sim.System{Fake: m}
	if id, ok := o.str("uuid", true); ok {
		if !uuidRe.MatchString(id) {
			c.add("%s: uuid %q: want a UUID, 8-4-4-4-12 hex digits such as 27946b59-9e44-4fa7-8e91-f3527a1ef094", where, short(id))
		} else {
			seen.claim(c, "uuid", id, where)
			s.UUID = id
		}
	}
	s.Name, _ = o.name(seen)
	if p, ok := o.str("power_state", true); ok {
		s.Power = power(c, where+": power_state", p)
	}
	s.NICs, _ = o.nics(seen, true, false)
	s.Notify, _ = o.boolean("external_notifier")
	if d, ok := o.str("boot_device", false); ok {
		s.BootDevice = bootSource(c, where+": boot_device", d)
	}
	if d, ok := o.str("boot_mode", false); ok {
		s.BootMode = bootMode(c, where+": boot_mode", d)
	}
	s.SecureBoot, _ = o.boolean("secure_boot")
	if s.SecureBoot && s.BootMode == machine.BootModeLegacy {
		c.add("%s: secure_boot True needs boot_mode UEFI", where)
	}
	return s, len(c.problems)+c.more == before
}

// nics reads an entry's nics: a list of {mac, ip}, and in vbmcd's form
// (strict) a network too and nothing else; the fake driver's may carry
// more (a name), kept in its entry. given says the entry has the key.
func (o obj) nics(seen unique, required, strict bool) (nics []sim.NIC, given bool) {
	list, ok := o.list("nics", required)
	if !ok {
		_, given = o.m["nics"]
		return nil, given
	}
	for j, n := range list {
		nw := fmt.Sprintf("%s: nics[%d]", o.where, j)
		nm, isDict := n.(map[string]any)
		if !isDict {
			o.c.add("%s is %s; want a dict with mac and ip", nw, kind(n))
			continue
		}
		no := obj{c: o.c, where: nw, m: nm}
		var nic sim.NIC
		if mac, ok := no.str("mac", true); ok {
			if !macRe.MatchString(mac) {
				o.c.add("%s: mac %q: want a MAC address such as 00:5c:52:31:3a:9c", nw, short(mac))
			} else {
				nic.MAC = strings.ToLower(mac)
				seen.claim(o.c, "mac", nic.MAC, nw)
			}
		}
		if ip, ok := no.str("ip", false); ok {
			checkIP(o.c, nw+": ip", ip)
			nic.IP = ip
		}
		if strict {
			no.only("mac", "ip", "network")
			nic.Network, _ = no.str("network", false)
		} else {
			no.str("name", false)
		}
		nics = append(nics, nic)
	}
	return nics, true
}

// name reads an entry's name, which must be unique.
func (o obj) name(seen unique) (string, bool) {
	n, ok := o.str("name", true)
	if !ok {
		return "", false
	}
	if why := checkName(n); why != "" {
		o.c.add("%s: name %q %s", o.where, short(n), why)
		return "", false
	}
	seen.claim(o.c, "name", n, o.where)
	return n, true
}

// vbmcdForm reads vbmcd's own form:
//
//	notifier: {url: URL, caFile: F, certFile: F, keyFile: F}
//	media: fetch | probe
//	systems:
//	- name: node-0
//	  uuid: UUID
//	  power: On | Off
//	  cpus: 4
//	  memory: 8Gi
//	  bootMode: UEFI | Legacy
//	  secureBoot: false
//	  bootDevice: Pxe
//	  nics: [{mac: 52:54:00:00:00:01, ip: 192.168.111.20, network: baremetal}]
//	  disks: [{name: vda, size: 120Gi, bus: virtio, ssd: true}]
//	  bios: {ProcTurboMode: Disabled}
//	  firmware: {BIOS: "2.1.0", BMC: "1.4.0", NIC: "20.5"}
//	  notify: true
//	  media: probe
func vbmcdForm(name string, top map[string]any) (*File, error) {
	c := &checker{}
	f := &File{Form: FormVbmcd}
	t := obj{c: c, where: "top level", m: top}
	t.only("systems", "notifier", "media")
	if n, ok := t.dict("notifier"); ok {
		no := obj{c: c, where: "notifier", m: n}
		no.only("url", "caFile", "certFile", "keyFile")
		if u, ok := no.str("url", true); ok {
			checkURL(c, "notifier: url", u)
			f.Notifier.URL = u
		}
		f.Notifier.CAFile, _ = no.str("caFile", false)
		f.Notifier.CertFile, _ = no.str("certFile", false)
		f.Notifier.KeyFile, _ = no.str("keyFile", false)
		if (f.Notifier.CertFile == "") != (f.Notifier.KeyFile == "") {
			c.add("notifier: certFile and keyFile go together (a client certificate and its key)")
		}
	}
	if m, ok := t.str("media", false); ok {
		f.Media = mediaMode(c, "media", m)
	}
	list, ok := t.list("systems", true)
	if ok && (len(list) == 0 || len(list) > MaxSystems) {
		c.add("systems has %d entries; want 1 to %d", len(list), MaxSystems)
		list = nil
	}
	seen := unique{}
	notify := false
	for i, e := range list {
		s, ok := system(c, seen, i, e)
		if ok {
			f.Systems = append(f.Systems, s)
			notify = notify || s.Notify
		}
	}
	if notify && f.Notifier.URL == "" {
		f.Notifier.URL = DefaultNotificationURL
	}
	return f, c.err(name, FormVbmcd)
}

// entry is a systems list's entry e, at where, as an object whose place
// names it by its name when it has one; an entry that is not an object is a
// problem, saying what was wanted.
func entry(c *checker, where string, e any, want string) (obj, bool) {
	m, ok := e.(map[string]any)
	if !ok {
		c.add("%s is %s; want %s", where, kind(e), want)
		return obj{}, false
	}
	if n, isStr := m["name"].(string); isStr {
		where += fmt.Sprintf(" (%s)", short(n))
	}
	return obj{c: c, where: where, m: m}, true
}

// system reads one entry of vbmcd's form.
func system(c *checker, seen unique, i int, e any) (sim.System, bool) {
	o, ok := entry(c, fmt.Sprintf("systems[%d]", i), e, "a mapping with name: and the machine's settings")
	if !ok {
		return sim.System{}, false
	}
	where, m := o.where, o.m
	before := len(c.problems) + c.more
	o.only("name", "uuid", "power", "cpus", "memory", "bootMode", "secureBoot", "bootDevice", "nics", "disks", "bios", "firmware", "notify", "media")
	var s sim.System
	if n, ok := o.name(seen); ok {
		s.Name, s.UUID = n, sim.UUIDFor(n)
	}
	if id, ok := o.str("uuid", false); ok {
		if !uuidRe.MatchString(id) {
			c.add("%s: uuid %q: want a UUID, 8-4-4-4-12 hex digits (or leave it out: one is derived from the name)", where, short(id))
		} else {
			s.UUID = id
		}
	}
	if s.UUID != "" {
		seen.claim(c, "uuid", s.UUID, where)
	}
	// YAML 1.1 reads On and Off as true and false.
	if p, isBool := m["power"].(bool); isBool {
		s.Power = map[bool]machine.PowerState{true: machine.PowerOn, false: machine.PowerOff}[p]
	} else if p, ok := o.str("power", false); ok {
		s.Power = power(c, where+": power", p)
	}
	if n, ok := o.number("cpus"); ok {
		if n < 1 || n > 1024 || n != float64(int(n)) {
			c.add("%s: cpus %v: want a whole number from 1 to 1024", where, n)
		}
		s.VCPUs = int(n)
	}
	if n, ok := o.size("memory"); ok {
		s.MemoryBytes = n
	}
	if v, ok := o.str("bootMode", false); ok {
		s.BootMode = bootMode(c, where+": bootMode", v)
	}
	s.SecureBoot, _ = o.boolean("secureBoot")
	if s.SecureBoot && s.BootMode == machine.BootModeLegacy {
		c.add("%s: secureBoot true needs bootMode UEFI", where)
	}
	if v, ok := o.str("bootDevice", false); ok {
		s.BootDevice = bootSource(c, where+": bootDevice", v)
	}
	if nics, given := o.nics(seen, false, true); given {
		s.NICs = nics
	} else if _, given := m["nics"]; !given {
		// One NIC, its MAC from the entry's place in the file.
		mac := fmt.Sprintf("52:54:01:%02x:%02x:%02x", ((i+1)>>16)&0xff, ((i+1)>>8)&0xff, (i+1)&0xff)
		seen.claim(c, "mac", mac, where+" (its default NIC)")
		s.NICs = []sim.NIC{{MAC: mac}}
	}
	if disks, ok := o.list("disks", false); ok {
		ids := map[string]bool{}
		for j, d := range disks {
			dw := fmt.Sprintf("%s: disks[%d]", where, j)
			dm, isDict := d.(map[string]any)
			if !isDict {
				c.add("%s is %s; want a mapping with size:", dw, kind(d))
				continue
			}
			do := obj{c: c, where: dw, m: dm}
			do.only("name", "size", "bus", "ssd")
			disk := sim.Disk{ID: fmt.Sprintf("vd%c", 'a'+j%26)}
			if id, ok := do.str("name", false); ok {
				if !diskRe.MatchString(id) {
					c.add("%s: name %q: want a device name such as vda or sdb (sdy and sdz are the virtual media's)", dw, short(id))
				}
				disk.ID = id
			}
			if ids[disk.ID] {
				c.add("%s: name %s is another disk's", dw, disk.ID)
			}
			ids[disk.ID] = true
			if n, ok := do.size("size"); ok {
				disk.Capacity = n
			} else if _, given := dm["size"]; !given {
				c.add("%s: size is missing", dw)
			}
			if b, ok := do.str("bus", false); ok {
				if b != "virtio" && b != "sata" && b != "scsi" {
					c.add("%s: bus %q: want virtio, sata or scsi", dw, short(b))
				}
				disk.Bus = b
			}
			disk.SSD, _ = do.boolean("ssd")
			s.Disks = append(s.Disks, disk)
		}
	}
	if b, ok := o.dict("bios"); ok {
		for _, live := range []string{machine.BIOSBootMode, machine.BIOSSecureBoot} {
			if _, has := b[live]; has {
				c.add("%s: bios: %s is set with the system's %s", where, live, map[string]string{machine.BIOSBootMode: "bootMode", machine.BIOSSecureBoot: "secureBoot"}[live])
				delete(b, live)
			}
		}
		if err := machine.ValidateBIOS(b); err != nil {
			c.add("%s: bios: %v", where, err)
		}
		s.BIOS = b
	}
	if fw, ok := o.dict("firmware"); ok {
		s.Firmware = map[machine.FirmwareComponent]string{}
		for k, v := range fw {
			comp := machine.FirmwareComponent(k)
			if !slices.Contains(machine.FirmwareComponents, comp) {
				c.add("%s: firmware: %q is no component; want %v", where, k, machine.FirmwareComponents)
				continue
			}
			ver, isStr := v.(string)
			if !isStr || !versionRe.MatchString(ver) {
				c.add("%s: firmware: %s is %s; want a version string such as \"2.1.0\" (quoted: YAML reads 2.10 as the number 2.1)", where, k, kind(v))
				continue
			}
			s.Firmware[comp] = ver
		}
	}
	s.Notify, _ = o.boolean("notify")
	if v, ok := o.str("media", false); ok {
		s.Media = mediaMode(c, where+": media", v)
	}
	return s, len(c.problems)+c.more == before
}

var (
	diskRe    = regexp.MustCompile(`^(vd|sd|hd)([a-x]|[a-z][a-z])$`)
	versionRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
)
