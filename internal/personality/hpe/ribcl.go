package hpe

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/machine"
)

// RIBCL, as iLO answers it. A request is one RIBCL document:
//
//	<RIBCL VERSION="2.0">
//	  <LOGIN USER_LOGIN="admin" PASSWORD="…">
//	    <SERVER_INFO MODE="read"><GET_PRODUCT_NAME/></SERVER_INFO>
//	  </LOGIN>
//	</RIBCL>
//
// The answer is a run of RIBCL documents, each <?xml?> headed: one for the
// request and the login, then one per command, whose RESPONSE (STATUS
// 0x0000 and MESSAGE 'No error', or an error) comes before the command's
// data; the first error ends the run. proliantutils splits the run at each
// <?xml and raises on the first non-zero STATUS (ribcl.py _parse_output,
// _validate_message).

// Status is a RIBCL RESPONSE STATUS.
type Status uint16

// The statuses vbmcd answers, with iLO's messages (proliantutils'
// exception.py and ribcl_sample_outputs.py, HPE's iLO scripting guide).
const (
	StatusOK          Status = 0x0000
	StatusSyntax      Status = 0x0001 // "Syntax error: …"
	StatusBadValue    Status = 0x0004 // a value the command does not take
	StatusVirtualMed  Status = 0x0035 // "An invalid Virtual Media option has been given"
	StatusNoImage     Status = 0x0039 // no image in the drive to eject
	StatusUnsupported Status = 0x003C // "Feature not supported - CMD"
	StatusLoginFailed Status = 0x005F // "Login failed."
	StatusBusy        Status = 0x0043 // the server refused the change now
)

// Error is a command's failure as iLO answers it.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("RIBCL status 0x%04X: %s", uint16(e.Status), e.Message)
}

func ribclError(st Status, format string, args ...any) *Error {
	return &Error{Status: st, Message: fmt.Sprintf(format, args...)}
}

// Request is a parsed RIBCL request.
type Request struct {
	User, Password string
	Commands       []Command
}

// Command is one command, in the block (SERVER_INFO, RIB_INFO, USER_INFO)
// and mode it was sent in.
type Command struct {
	Block, Mode string
	Name        string
	Attrs       map[string]string
	Kids        []Child
	Line        int
}

// Child is a command's sub-element (SET_PERSISTENT_BOOT's DEVICE,
// SET_VM_STATUS's VM_BOOT_OPTION).
type Child struct {
	Name  string
	Value string // its VALUE attribute (value, in either case)
}

// maxCommands bounds one request.
const maxCommands = 64

// ParseRequest reads a RIBCL request; a request iLO would not take is an
// Error with the status iLO gives (Syntax error).
func ParseRequest(body []byte) (Request, error) {
	var req Request
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	var path []string
	var cur *Command
	var mode string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return req, ribclError(StatusSyntax, "Syntax error: %v.", err)
		}
		line, _ := d.InputPos()
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			switch len(path) {
			case 0:
				if name != "RIBCL" {
					return req, ribclError(StatusSyntax, "Syntax error: Line #%d: syntax error near \"<%s\": the request must be a RIBCL document.", line, name)
				}
			case 1:
				if name != "LOGIN" {
					return req, ribclError(StatusSyntax, "Syntax error: Line #%d: syntax error near \"<%s\": LOGIN expected.", line, name)
				}
				req.User, req.Password = attr(t, "USER_LOGIN"), attr(t, "PASSWORD")
			case 2:
				switch name {
				case "SERVER_INFO", "RIB_INFO", "USER_INFO":
					mode = attr(t, "MODE")
				default:
					return req, ribclError(StatusSyntax, "Syntax error: Line #%d: syntax error near \"<%s\": SERVER_INFO, RIB_INFO or USER_INFO expected.", line, name)
				}
			case 3:
				if len(req.Commands) == maxCommands {
					return req, ribclError(StatusSyntax, "Syntax error: Line #%d: more than %d commands in one request.", line, maxCommands)
				}
				c := Command{Block: path[2], Mode: mode, Name: name, Attrs: map[string]string{}, Line: line}
				for _, a := range t.Attr {
					c.Attrs[strings.ToUpper(a.Name.Local)] = a.Value
				}
				req.Commands = append(req.Commands, c)
				cur = &req.Commands[len(req.Commands)-1]
			case 4:
				if cur != nil && len(cur.Kids) < maxCommands {
					cur.Kids = append(cur.Kids, Child{Name: name, Value: attr(t, "VALUE")})
				}
			}
			path = append(path, name)
		case xml.EndElement:
			if len(path) == 4 {
				cur = nil
			}
			path = path[:len(path)-1]
		}
	}
	if req.User == "" {
		return req, ribclError(StatusSyntax, "Syntax error: the request has no LOGIN with USER_LOGIN.")
	}
	return req, nil
}

// attr is an attribute's value, its name in any case.
func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if strings.EqualFold(a.Name.Local, name) {
			return a.Value
		}
	}
	return ""
}

// Server is what the commands read and change: the machine behind one
// iLO, through the machine model. Each change may be refused with an
// error, which the command answers with its status.
type Server interface {
	// Machine is the machine as it is now.
	Machine() (*machine.Machine, error)
	// Product is the server's model ("ProLiant DL360 Gen11"); ILO and ROM
	// are the iLO's and the system ROM's firmware versions.
	Product() string
	ILO() string
	ROM() string
	Reset(ctx context.Context, rt machine.ResetType) error
	SetBoot(ctx context.Context, p machine.BootPatch) error
	SetBootOrder(ctx context.Context, refs []string) error
	SetPendingBootMode(ctx context.Context, mode machine.BootMode) error
	Insert(ctx context.Context, slot machine.MediaSlot, url string) error
	Eject(ctx context.Context, slot machine.MediaSlot) error
	// Media is a drive as the machine's media service shows it: an
	// insert still fetching its image shows inserted, as an iLO's drive
	// has its image from INSERT_VIRTUAL_MEDIA's answer on.
	Media(m *machine.Machine, slot machine.MediaSlot) machine.Media
}

// element is an XML element of an answer.
type element struct {
	name  string
	attrs [][2]string
	kids  []element
}

func el(name string, attrs ...string) element {
	e := element{name: name}
	for i := 0; i+1 < len(attrs); i += 2 {
		e.attrs = append(e.attrs, [2]string{attrs[i], attrs[i+1]})
	}
	return e
}

func value(name, v string) element { return el(name, "VALUE", v) }

func (e element) with(kids ...element) element { e.kids = append(e.kids, kids...); return e }

func (e element) write(b *bytes.Buffer, indent string) {
	b.WriteString(indent + "<" + e.name)
	for _, a := range e.attrs {
		b.WriteString(" " + a[0] + `="`)
		_ = xml.EscapeText(b, []byte(a[1]))
		b.WriteString(`"`)
	}
	if len(e.kids) == 0 {
		b.WriteString("/>\n")
		return
	}
	b.WriteString(">\n")
	for _, k := range e.kids {
		k.write(b, indent+"  ")
	}
	b.WriteString(indent + "</" + e.name + ">\n")
}

// ribclVersion is the RIBCL version iLO 6 answers with.
const ribclVersion = "2.23"

func document(b *bytes.Buffer, st Status, msg string, data []element) {
	fmt.Fprintf(b, "<?xml version=\"1.0\"?>\n<RIBCL VERSION=%q>\n<RESPONSE\n    STATUS=\"0x%04X\"\n    MESSAGE=\"", ribclVersion, uint16(st))
	_ = xml.EscapeText(b, []byte(msg))
	b.WriteString("\"\n     />\n")
	for _, e := range data {
		e.write(b, "")
	}
	b.WriteString("</RIBCL>\n")
}

// Answer writes iLO's answer to a request whose login failed, or could not
// be read (err).
func Answer(err error) []byte {
	var b bytes.Buffer
	document(&b, StatusOK, "No error", nil)
	var re *Error
	if !errors.As(err, &re) {
		re = ribclError(StatusSyntax, "Syntax error: %v", err)
	}
	document(&b, re.Status, re.Message, nil)
	return b.Bytes()
}

// Execute runs the request's commands against s, in order, and returns
// iLO's answer; the first command that fails ends the run, as on iLO. A
// command of a block sent in mode read that would change the server is
// refused. changed reports whether any command changed the server.
func Execute(ctx context.Context, s Server, req Request) (answer []byte, changed bool) {
	var b bytes.Buffer
	document(&b, StatusOK, "No error", nil)
	for _, c := range req.Commands {
		var data []element
		var msg string
		var write bool
		var err error
		if writes[c.Name] && !strings.EqualFold(c.Mode, "write") {
			err = ribclError(StatusSyntax, "Syntax error: Line #%d: %s needs MODE=\"write\" in its %s block.", c.Line, c.Name, c.Block)
		} else {
			data, msg, write, err = run(ctx, s, c)
		}
		if err != nil {
			var re *Error
			if !errors.As(err, &re) {
				re = ribclError(StatusBusy, "%v", err)
			}
			document(&b, re.Status, re.Message, nil)
			return b.Bytes(), changed
		}
		changed = changed || write
		if msg == "" {
			msg = "No error"
		}
		document(&b, StatusOK, msg, data)
	}
	return b.Bytes(), changed
}

// writes are the commands that change the server: iLO takes them in a
// block of MODE="write" only.
var writes = map[string]bool{
	"SET_HOST_POWER": true, "HOLD_PWR_BTN": true, "PRESS_PWR_BTN": true, "RESET_SERVER": true,
	"WARM_BOOT_SERVER": true, "COLD_BOOT_SERVER": true, "SET_ONE_TIME_BOOT": true,
	"SET_PENDING_BOOT_MODE": true, "SET_PERSISTENT_BOOT": true, "INSERT_VIRTUAL_MEDIA": true,
	"EJECT_VIRTUAL_MEDIA": true, "SET_VM_STATUS": true,
}

// The virtual media devices: FLOPPY is iLO's virtual media 1 (the USB key
// or floppy), CDROM its 2.
var devices = map[string]machine.MediaSlot{"FLOPPY": machine.SlotRemovable, "CDROM": machine.SlotCD}

// oneTime maps SET_ONE_TIME_BOOT's values to the override target, and back.
var oneTime = map[string]machine.BootSource{
	"CDROM": machine.BootCd, "HDD": machine.BootHdd, "NETWORK": machine.BootPxe,
	"FLOPPY": machine.BootUsb, "USB": machine.BootUsb, "RBSU": machine.BootBiosSetup,
}

func oneTimeName(t machine.BootSource) string {
	switch t {
	case machine.BootCd:
		return "CDROM"
	case machine.BootHdd:
		return "HDD"
	case machine.BootPxe:
		return "NETWORK"
	case machine.BootUsb:
		return "USB"
	case machine.BootBiosSetup:
		return "RBSU"
	}
	return "Normal"
}

// run carries out one command: its data, its RESPONSE message when not
// "No error", whether it changes the server, and its failure.
func run(ctx context.Context, s Server, c Command) (data []element, msg string, write bool, err error) {
	m, err := s.Machine()
	if err != nil {
		return nil, "", false, err
	}
	a := func(k string) string { return c.Attrs[k] }
	switch c.Name {
	case "GET_PRODUCT_NAME":
		return []element{el("GET_PRODUCT_NAME").with(value("PRODUCT_NAME", s.Product()))}, "", false, nil
	case "GET_HOST_POWER_STATUS":
		return []element{el("GET_HOST_POWER", "HOST_POWER", onOff(m.Power != machine.PowerOff))}, "", false, nil
	case "GET_ONE_TIME_BOOT":
		v := "Normal"
		if m.Settings.Boot.Enabled == machine.BootOnce {
			v = oneTimeName(m.Settings.Boot.Target)
		}
		return []element{el("ONE_TIME_BOOT").with(value("BOOT_TYPE", v))}, "", false, nil
	case "GET_CURRENT_BOOT_MODE":
		return []element{el("GET_CURRENT_BOOT_MODE").with(value("BOOT_MODE", modeName(m.Settings.Boot.Mode)))}, "", false, nil
	case "GET_PENDING_BOOT_MODE":
		mode := m.Settings.Boot.Mode
		if p, ok := m.Settings.BIOSPending[machine.BIOSBootMode]; ok {
			mode = machine.BootModeUEFI
			if p == "Bios" {
				mode = machine.BootModeLegacy
			}
		}
		return []element{el("GET_PENDING_BOOT_MODE").with(value("BOOT_MODE", modeName(mode)))}, "", false, nil
	case "GET_SUPPORTED_BOOT_MODE":
		v := "LEGACY_UEFI"
		if m.UEFIOnly() {
			v = "UEFI_ONLY"
		}
		return []element{el("GET_SUPPORTED_BOOT_MODE").with(value("SUPPORTED_BOOT_MODE", v))}, "", false, nil
	case "GET_PERSISTENT_BOOT":
		return []element{persistentBoot(m)}, "", false, nil
	case "GET_VM_STATUS":
		slot, ok := devices[strings.ToUpper(a("DEVICE"))]
		if !ok {
			return nil, "", false, ribclError(StatusVirtualMed, "An invalid Virtual Media option has been given")
		}
		return []element{vmStatus(m, s.Media(m, slot), strings.ToUpper(a("DEVICE")), slot)}, "", false, nil
	case "GET_EMBEDDED_HEALTH":
		return []element{embeddedHealth(m, s.ILO(), s.ROM())}, "", false, nil

	case "SET_HOST_POWER":
		switch strings.ToUpper(a("HOST_POWER")) {
		case "YES":
			if m.Power != machine.PowerOff {
				return nil, "Host power is already ON.", true, nil
			}
			return nil, "", true, s.Reset(ctx, machine.ResetOn)
		case "NO":
			if m.Power == machine.PowerOff {
				return nil, "Host power is already OFF.", true, nil
			}
			return nil, "", true, s.Reset(ctx, machine.ResetForceOff)
		}
		return nil, "", true, ribclError(StatusBadValue, "The value of HOST_POWER must be Yes or No.")
	case "HOLD_PWR_BTN":
		if m.Power == machine.PowerOff {
			if strings.EqualFold(a("TOGGLE"), "YES") {
				return nil, "", true, s.Reset(ctx, machine.ResetOn)
			}
			return nil, "Host power is already OFF.", true, nil
		}
		return nil, "", true, s.Reset(ctx, machine.ResetForceOff)
	case "PRESS_PWR_BTN":
		return nil, "", true, s.Reset(ctx, machine.ResetPushPowerButton)
	case "RESET_SERVER", "WARM_BOOT_SERVER", "COLD_BOOT_SERVER":
		rt := machine.ResetForceRestart
		if c.Name == "COLD_BOOT_SERVER" {
			rt = machine.ResetPowerCycle
		}
		return nil, "", true, s.Reset(ctx, rt)
	case "SET_ONE_TIME_BOOT":
		v := strings.ToUpper(a("VALUE"))
		if v == "NORMAL" {
			none := machine.BootNone
			return nil, "", true, s.SetBoot(ctx, machine.BootPatch{Target: &none})
		}
		t, ok := oneTime[v]
		if !ok {
			return nil, "", true, ribclError(StatusBadValue, "The value %q is not a one-time boot device; the devices are Normal, CDROM, HDD, NETWORK, FLOPPY, USB, RBSU.", a("VALUE"))
		}
		once := machine.BootOnce
		return nil, "", true, s.SetBoot(ctx, machine.BootPatch{Target: &t, Enabled: &once})
	case "SET_PENDING_BOOT_MODE":
		switch strings.ToUpper(a("VALUE")) {
		case "UEFI":
			return nil, "", true, s.SetPendingBootMode(ctx, machine.BootModeUEFI)
		case "LEGACY":
			return nil, "", true, s.SetPendingBootMode(ctx, machine.BootModeLegacy)
		}
		return nil, "", true, ribclError(StatusBadValue, "The value %q is not a boot mode; the modes are UEFI and LEGACY.", a("VALUE"))
	case "SET_PERSISTENT_BOOT":
		refs, err := persistentOrder(m, c.Kids)
		if err != nil {
			return nil, "", true, err
		}
		return nil, "", true, s.SetBootOrder(ctx, refs)
	case "INSERT_VIRTUAL_MEDIA":
		slot, ok := devices[strings.ToUpper(a("DEVICE"))]
		if !ok || a("IMAGE_URL") == "" {
			return nil, "", true, ribclError(StatusVirtualMed, "An invalid Virtual Media option has been given")
		}
		return nil, "", true, s.Insert(ctx, slot, a("IMAGE_URL"))
	case "EJECT_VIRTUAL_MEDIA":
		slot, ok := devices[strings.ToUpper(a("DEVICE"))]
		if !ok {
			return nil, "", true, ribclError(StatusVirtualMed, "An invalid Virtual Media option has been given")
		}
		if !s.Media(m, slot).Inserted {
			return nil, "", true, ribclError(StatusNoImage, "No image present in the Virtual Media drive")
		}
		return nil, "", true, s.Eject(ctx, slot)
	case "SET_VM_STATUS":
		return nil, "", true, setVMStatus(ctx, s, m, strings.ToUpper(a("DEVICE")), c.Kids)
	}
	// iLO 6 knows commands vbmcd does not carry out (licenses, users,
	// firmware updates, SNMP, the directory, the NMI); they are refused as
	// iLO refuses a command a server does not have.
	return nil, "", false, ribclError(StatusUnsupported, "Feature not supported - %s", c.Name)
}

func onOff(on bool) string {
	if on {
		return "ON"
	}
	return "OFF"
}

func modeName(m machine.BootMode) string {
	if m == machine.BootModeLegacy {
		return "LEGACY"
	}
	return "UEFI"
}

// vmStatus is GET_VM_STATUS of a device.
func vmStatus(m *machine.Machine, md machine.Media, device string, slot machine.MediaSlot) element {
	inserted, url := "NO", ""
	if md.Inserted {
		inserted, url = "YES", md.Image
	}
	boot := "NO_BOOT"
	if b := m.Settings.Boot; b.Target == bootOf(slot) {
		switch b.Enabled {
		case machine.BootOnce:
			boot = "BOOT_ONCE"
		case machine.BootContinuous:
			boot = "BOOT_ALWAYS"
		}
	}
	return el("GET_VM_STATUS", "VM_APPLET", "DISCONNECTED", "DEVICE", device, "BOOT_OPTION", boot,
		"WRITE_PROTECT", "YES", "IMAGE_INSERTED", inserted, "IMAGE_URL", url)
}

func bootOf(slot machine.MediaSlot) machine.BootSource {
	if slot == machine.SlotCD {
		return machine.BootCd
	}
	return machine.BootUsb
}

// setVMStatus is SET_VM_STATUS: VM_BOOT_OPTION CONNECT keeps the image in
// (it is in), DISCONNECT ejects it, BOOT_ONCE and BOOT_ALWAYS make the
// device the boot override, NO_BOOT takes it off the override;
// VM_WRITE_PROTECT YES is what the drive is (NO is refused: vbmcd's media
// are read-only).
func setVMStatus(ctx context.Context, s Server, m *machine.Machine, device string, kids []Child) error {
	slot, ok := devices[device]
	if !ok {
		return ribclError(StatusVirtualMed, "An invalid Virtual Media option has been given")
	}
	for _, k := range kids {
		v := strings.ToUpper(k.Value)
		switch k.Name {
		case "VM_WRITE_PROTECT":
			if v != "YES" {
				return ribclError(StatusVirtualMed, "An invalid Virtual Media option has been given: the virtual media are write protected")
			}
		case "VM_BOOT_OPTION":
			var err error
			switch v {
			case "CONNECT":
				if !s.Media(m, slot).Inserted {
					err = ribclError(StatusNoImage, "No image present in the Virtual Media drive")
				}
			case "DISCONNECT":
				if s.Media(m, slot).Inserted {
					err = s.Eject(ctx, slot)
				}
			case "BOOT_ONCE", "BOOT_ALWAYS":
				t, e := bootOf(slot), machine.BootOnce
				if v == "BOOT_ALWAYS" {
					e = machine.BootContinuous
				}
				err = s.SetBoot(ctx, machine.BootPatch{Target: &t, Enabled: &e})
			case "NO_BOOT":
				if m.Settings.Boot.Target == bootOf(slot) {
					none := machine.BootNone
					err = s.SetBoot(ctx, machine.BootPatch{Target: &none})
				}
			default:
				err = ribclError(StatusVirtualMed, "An invalid Virtual Media option has been given")
			}
			if err != nil {
				return err
			}
		default:
			return ribclError(StatusVirtualMed, "An invalid Virtual Media option has been given")
		}
	}
	return nil
}

// bootNumber is the UEFI Boot#### name of the i-th boot option.
func bootNumber(i int) string { return fmt.Sprintf("Boot%04X", i+1) }

// description is how iLO describes a boot option in GET_PERSISTENT_BOOT;
// proliantutils tells the kinds apart by these words (HP iLO Virtual USB
// CD, NIC and PXE, HDD: ribcl.py _get_virtual_boot_devices,
// _get_nic_boot_devices, common.isDisk).
func description(o machine.BootOption) string {
	switch o.Alias {
	case machine.BootCd:
		return "iLO Virtual USB 2 : HP iLO Virtual USB CD/DVD ROM"
	case machine.BootHdd:
		return "Embedded SATA Port " + o.Device + " HDD : " + o.DisplayName
	case machine.BootUsb:
		return "iLO Virtual USB 1 : HP iLO Virtual USB Key"
	case machine.BootPxe:
		return "Embedded LOM 1 Port 1 : Network Adapter - NIC (PXE IPv4) " + o.Device
	case machine.BootUefiHttp:
		return "Embedded LOM 1 Port 1 : Network Adapter - NIC (HTTP(S) IPv4) " + o.Device
	}
	return o.DisplayName
}

// persistentBoot is GET_PERSISTENT_BOOT: in UEFI mode the boot order's
// options by Boot#### with their descriptions; in Legacy mode the kinds.
func persistentBoot(m *machine.Machine) element {
	e := el("PERSISTENT_BOOT")
	opts := m.BootOptions()
	if m.Settings.Boot.Mode == machine.BootModeLegacy {
		seen := map[string]bool{}
		for _, ref := range m.BootOrder() {
			o, _ := m.BootOption(ref)
			k := oneTimeName(o.Alias)
			if k != "Normal" && !seen[k] {
				seen[k] = true
				e = e.with(el("DEVICE", "value", k))
			}
		}
		return e
	}
	for _, ref := range m.BootOrder() {
		i := slices.IndexFunc(opts, func(o machine.BootOption) bool { return o.Ref == ref })
		if i >= 0 {
			e = e.with(el("DEVICE", "value", bootNumber(i), "DESCRIPTION", description(opts[i])))
		}
	}
	return e
}

// persistentOrder is the boot order SET_PERSISTENT_BOOT asks for: the
// devices it names first, in its order, then the others as they were.
func persistentOrder(m *machine.Machine, kids []Child) ([]string, error) {
	opts := m.BootOptions()
	var first []string
	for _, k := range kids {
		if k.Name != "DEVICE" {
			return nil, ribclError(StatusSyntax, "Syntax error: SET_PERSISTENT_BOOT takes DEVICE elements, not %s.", k.Name)
		}
		var refs []string
		for i, o := range opts {
			if strings.EqualFold(bootNumber(i), k.Value) {
				refs = []string{o.Ref}
			}
		}
		if t, ok := oneTime[strings.ToUpper(k.Value)]; ok && len(refs) == 0 && m.Settings.Boot.Mode == machine.BootModeLegacy {
			for _, o := range opts {
				if o.Alias == t {
					refs = append(refs, o.Ref)
				}
			}
		}
		if len(refs) == 0 {
			return nil, ribclError(StatusBadValue, "The boot device %q is not one of this server's.", k.Value)
		}
		for _, r := range refs {
			if !slices.Contains(first, r) {
				first = append(first, r)
			}
		}
	}
	if len(first) == 0 {
		return nil, ribclError(StatusSyntax, "Syntax error: SET_PERSISTENT_BOOT names no DEVICE.")
	}
	order := slices.Clone(first)
	for _, r := range m.BootOrder() {
		if !slices.Contains(order, r) {
			order = append(order, r)
		}
	}
	return order, nil
}
