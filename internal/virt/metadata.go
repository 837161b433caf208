package virt

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// MetadataNS is the XML namespace of the BMC state kept in a domain's
// <metadata>.
const MetadataNS = "http://bmlab.dev/xmlns/bmc/1"

// bmcMeta is the stored form of machine.Settings plus what the backend needs
// to undo its own changes. Readable with `virsh dumpxml`.
type bmcMeta struct {
	XMLName     xml.Name     `xml:"http://bmlab.dev/xmlns/bmc/1 bmc"`
	Boot        metaBoot     `xml:"boot"`
	DefaultBoot string       `xml:"default-boot,omitempty"` // the domain's own boot order before the BMC changed it, "hd,cdrom"
	BootOrder   string       `xml:"boot-order,omitempty"`   // BootOptionReferences, "Cd-sdc,Hdd-vda"; none: the domain's own order
	SecureBoot  bool         `xml:"secure-boot"`
	DeletedKeys string       `xml:"deleted-keys,omitempty"` // secure boot key databases deleted, "PK,KEK"; none: the factory keys
	ResetNVRAM  bool         `xml:"reset-nvram,omitempty"`  // the firmware changed: the next start recreates the NVRAM
	BIOS        string       `xml:"bios,omitempty"`         // JSON object
	BIOSPending string       `xml:"bios-pending,omitempty"`
	Users       []metaUser   `xml:"user"`
	IPMI        *metaIPMI    `xml:"ipmi"`
	Address     string       `xml:"bmc-address,omitempty"` // the machine's own BMC's address (vbmcd --bmc-addresses)
	Media       []metaMedia  `xml:"media"`
	Volumes     []metaVolume `xml:"volume"`
	// Firmware are the updated firmware versions, current or staged.
	Firmware []metaFirmware `xml:"firmware"`
	// Trash are the disks of deleted volumes the running domain still
	// held; the next start removes them.
	Trash []string `xml:"trash"`
	// Clock is the BMC's clock setting.
	Clock *metaClock `xml:"clock"`
	// Personality and Quirks are the vendor the BMC looks like and its
	// quirk switches.
	Personality string `xml:"personality,omitempty"`
	Quirks      string `xml:"quirks,omitempty"`
}

// metaClock is the BMC's clock: its skew from the host's, in seconds, and
// its local offset.
type metaClock struct {
	Skew   int64  `xml:"skew-seconds,attr,omitempty"`
	Offset string `xml:"offset,attr,omitempty"`
}

// metaVolume is one RAID volume.
type metaVolume struct {
	ID       string `xml:"id,attr"`
	Name     string `xml:"name,attr"`
	RAIDType string `xml:"raid,attr"`
	Drives   string `xml:"drives,attr"` // comma-separated disk IDs
	Capacity int64  `xml:"capacity,attr"`
	Path     string `xml:"path,attr,omitempty"`
}

// metaFirmware is one component's updated firmware version.
type metaFirmware struct {
	Component string `xml:"component,attr"`
	Version   string `xml:"version,attr"`
	Pending   bool   `xml:"pending,attr,omitempty"` // applies at the next reset
}

// metaMedia is one virtual media member: trust settings and the origin of
// the file in its drive.
type metaMedia struct {
	Slot     string     `xml:"slot,attr"`
	Verify   bool       `xml:"verify-certificate,attr,omitempty"`
	Image    string     `xml:"image,attr,omitempty"`
	Path     string     `xml:"path,attr,omitempty"`
	User     string     `xml:"user,attr,omitempty"`
	Protocol string     `xml:"protocol,attr,omitempty"`
	HTTPBoot bool       `xml:"http-boot,attr,omitempty"` // put there by a UefiHttp boot
	Certs    []metaCert `xml:"certificate"`
}

type metaCert struct {
	ID  string `xml:"id,attr"`
	PEM string `xml:",chardata"`
}

type metaBoot struct {
	Target  string `xml:"target,attr"`
	Enabled string `xml:"enabled,attr"`
	Mode    string `xml:"mode,attr"`
	HTTPURI string `xml:"http-boot-uri,attr,omitempty"`
	Next    string `xml:"next,attr,omitempty"` // BootNext
}

type metaUser struct {
	Name     string `xml:"name,attr"`
	Password string `xml:"password,attr"`
}

type metaIPMI struct {
	Address string `xml:"address,attr,omitempty"`
	Port    int    `xml:"port,attr"`
}

func toMeta(s machine.Settings, defaultBoot string, resetNVRAM bool) (*bmcMeta, error) {
	m := &bmcMeta{
		Boot:        metaBoot{Target: string(s.Boot.Target), Enabled: string(s.Boot.Enabled), Mode: string(s.Boot.Mode), HTTPURI: s.Boot.HTTPBootURI, Next: s.Boot.BootNext},
		DefaultBoot: defaultBoot,
		BootOrder:   strings.Join(s.BootOrder, ","),
		SecureBoot:  s.SecureBoot,
		ResetNVRAM:  resetNVRAM,
	}
	for _, db := range s.DeletedKeys {
		if m.DeletedKeys != "" {
			m.DeletedKeys += ","
		}
		m.DeletedKeys += string(db)
	}
	for _, p := range []struct {
		dst *string
		src map[string]any
	}{{&m.BIOS, s.BIOS}, {&m.BIOSPending, s.BIOSPending}} {
		if len(p.src) == 0 {
			continue
		}
		b, err := json.Marshal(p.src)
		if err != nil {
			return nil, fmt.Errorf("encode BIOS settings: %w", err)
		}
		*p.dst = string(b)
	}
	for _, c := range s.Credentials {
		m.Users = append(m.Users, metaUser{Name: c.Username, Password: c.Password})
	}
	m.Personality, m.Quirks = s.Personality, s.Quirks
	if s.Clock != (machine.Clock{}) {
		m.Clock = &metaClock{Skew: int64(s.Clock.Skew / time.Second), Offset: s.Clock.Offset}
	}
	if s.IPMI != nil {
		m.IPMI = &metaIPMI{Address: s.IPMI.Address, Port: s.IPMI.Port}
	}
	m.Address = s.BMCAddress
	for _, v := range s.Volumes {
		m.Volumes = append(m.Volumes, metaVolume{ID: v.ID, Name: v.Name, RAIDType: v.RAIDType,
			Drives: strings.Join(v.Drives, ","), Capacity: v.CapacityBytes, Path: v.Path})
	}
	for _, p := range []struct {
		versions map[machine.FirmwareComponent]string
		pending  bool
	}{{s.Firmware, false}, {s.FirmwarePending, true}} {
		for _, c := range machine.FirmwareComponents {
			if v, ok := p.versions[c]; ok {
				m.Firmware = append(m.Firmware, metaFirmware{Component: string(c), Version: v, Pending: p.pending})
			}
		}
	}
	for _, ms := range s.Media {
		mm := metaMedia{Slot: string(ms.Slot), Verify: ms.VerifyCertificate, Image: ms.Image, Path: ms.Path,
			User: ms.UserName, Protocol: ms.TransferProtocol, HTTPBoot: ms.HTTPBoot}
		for _, c := range ms.Certificates {
			mm.Certs = append(mm.Certs, metaCert{ID: c.ID, PEM: c.PEM})
		}
		m.Media = append(m.Media, mm)
	}
	return m, nil
}

func (m *bmcMeta) settings() (machine.Settings, error) {
	s := machine.Settings{
		Boot: machine.Boot{
			Target:      machine.BootSource(m.Boot.Target),
			Enabled:     machine.BootEnabled(m.Boot.Enabled),
			Mode:        machine.BootMode(m.Boot.Mode),
			HTTPBootURI: m.Boot.HTTPURI,
			BootNext:    m.Boot.Next,
		},
		SecureBoot: m.SecureBoot,
	}
	if m.BootOrder != "" {
		s.BootOrder = strings.Split(m.BootOrder, ",")
	}
	if m.DeletedKeys != "" {
		var err error
		if s.DeletedKeys, err = machine.ParseKeyDatabases(strings.Split(m.DeletedKeys, ",")); err != nil {
			return s, err
		}
	}
	if s.Boot.Target == "" {
		s.Boot.Target = machine.BootNone
	}
	if s.Boot.Enabled == "" {
		s.Boot.Enabled = machine.BootDisabled
	}
	for _, p := range []struct {
		dst *map[string]any
		src string
	}{{&s.BIOS, m.BIOS}, {&s.BIOSPending, m.BIOSPending}} {
		if p.src == "" {
			continue
		}
		d := json.NewDecoder(strings.NewReader(p.src))
		d.UseNumber()
		var v map[string]any
		if err := d.Decode(&v); err != nil {
			return s, fmt.Errorf("decode stored BIOS settings: %w", err)
		}
		for k, x := range v {
			if n, ok := x.(json.Number); ok {
				if i, err := n.Int64(); err == nil {
					v[k] = int(i)
				}
			}
		}
		*p.dst = v
	}
	if s.BIOS == nil {
		s.BIOS = machine.DefaultBIOS()
	}
	for _, u := range m.Users {
		s.Credentials = append(s.Credentials, machine.Credential{Username: u.Name, Password: u.Password})
	}
	s.Personality, s.Quirks = m.Personality, m.Quirks
	if m.Clock != nil {
		s.Clock = machine.Clock{Skew: time.Duration(m.Clock.Skew) * time.Second, Offset: m.Clock.Offset}
	}
	if m.IPMI != nil {
		s.IPMI = &machine.IPMIEndpoint{Address: m.IPMI.Address, Port: m.IPMI.Port}
	}
	s.BMCAddress = m.Address
	for _, v := range m.Volumes {
		s.Volumes = append(s.Volumes, machine.Volume{ID: v.ID, Name: v.Name, RAIDType: v.RAIDType,
			Drives: strings.Split(v.Drives, ","), CapacityBytes: v.Capacity, Path: v.Path})
	}
	for _, f := range m.Firmware {
		dst := &s.Firmware
		if f.Pending {
			dst = &s.FirmwarePending
		}
		if *dst == nil {
			*dst = map[machine.FirmwareComponent]string{}
		}
		(*dst)[machine.FirmwareComponent(f.Component)] = f.Version
	}
	for _, mm := range m.Media {
		ms := machine.MediaSettings{Slot: machine.MediaSlot(mm.Slot), VerifyCertificate: mm.Verify, Image: mm.Image,
			Path: mm.Path, UserName: mm.User, TransferProtocol: mm.Protocol, HTTPBoot: mm.HTTPBoot}
		for _, c := range mm.Certs {
			ms.Certificates = append(ms.Certificates, machine.Certificate{ID: c.ID, PEM: c.PEM})
		}
		s.Media = append(s.Media, ms)
	}
	return s, nil
}

// findMeta returns the project's element from a <metadata> inner XML, or nil.
func findMeta(inner string) (*bmcMeta, error) {
	if !strings.Contains(inner, MetadataNS) {
		return nil, nil
	}
	d := xml.NewDecoder(strings.NewReader("<metadata>" + inner + "</metadata>"))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parse domain metadata: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Space != MetadataNS || se.Name.Local != "bmc" {
			continue
		}
		var m bmcMeta
		if err := d.DecodeElement(&m, &se); err != nil {
			return nil, fmt.Errorf("parse %s metadata: %w", MetadataNS, err)
		}
		return &m, nil
	}
}

// replaceMeta returns inner with the project's element replaced by m (or
// added), keeping every other element as it was.
func replaceMeta(inner string, m *bmcMeta) (string, error) {
	enc, err := xml.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode metadata: %w", err)
	}
	kept, err := withoutElement(inner, MetadataNS)
	if err != nil {
		return "", err
	}
	return kept + string(enc), nil
}

// withoutElement removes the top-level elements in namespace ns from an
// inner XML fragment.
func withoutElement(inner, ns string) (string, error) {
	if !strings.Contains(inner, ns) {
		return inner, nil
	}
	const open = "<metadata>"
	src := open + inner + "</metadata>"
	d := xml.NewDecoder(strings.NewReader(src))
	var out bytes.Buffer
	depth := 0
	last := int64(len(open))
	for {
		start := d.InputOffset()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("parse domain metadata: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 2 && t.Name.Space == ns {
				out.WriteString(src[last:start])
				if err := d.Skip(); err != nil {
					return "", fmt.Errorf("parse domain metadata: %w", err)
				}
				depth--
				last = d.InputOffset()
			}
		case xml.EndElement:
			depth--
		}
	}
	out.WriteString(src[last : len(src)-len("</metadata>")])
	return out.String(), nil
}

// NodeBMC is what labctl sets of a lab node's BMC before vbmcd serves it:
// its IPMI endpoint (nil: none), its own users (nil: none) and its
// personality ("": vbmcd's default).
type NodeBMC struct {
	IPMI        *machine.IPMIEndpoint
	Users       []machine.Credential
	Personality string
}

// SetNodeBMC records a node's IPMI endpoint and its own BMC users in the
// persistent definition of the domain named name (its <metadata>, where
// vbmcd reads them), keeping every other BMC setting, and reports whether
// it changed anything.
func SetNodeBMC(l *libvirt.Libvirt, name string, want NodeBMC) (bool, error) {
	d, err := l.DomainLookupByName(name)
	if err != nil {
		return false, fmt.Errorf("domain %s: %w", name, err)
	}
	x, err := l.DomainGetXMLDesc(d, libvirt.DomainXMLInactive|libvirt.DomainXMLSecure)
	if err != nil {
		return false, fmt.Errorf("domain XML of %s: %w", name, err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(x); err != nil {
		return false, fmt.Errorf("parse domain XML of %s: %w", name, err)
	}
	if def.Metadata == nil {
		def.Metadata = &libvirtxml.DomainMetadata{}
	}
	m, err := findMeta(def.Metadata.XML)
	if err != nil {
		return false, err
	}
	if m == nil {
		m = &bmcMeta{}
	}
	var ipmi *metaIPMI
	if want.IPMI != nil {
		ipmi = &metaIPMI{Address: want.IPMI.Address, Port: want.IPMI.Port}
	}
	var users []metaUser
	for _, c := range want.Users {
		users = append(users, metaUser{Name: c.Username, Password: c.Password})
	}
	if ((m.IPMI == nil) == (ipmi == nil)) && (ipmi == nil || *m.IPMI == *ipmi) && slices.Equal(m.Users, users) && m.Personality == want.Personality {
		return false, nil
	}
	m.IPMI, m.Users, m.Personality = ipmi, users, want.Personality
	if def.Metadata.XML, err = replaceMeta(def.Metadata.XML, m); err != nil {
		return false, err
	}
	out, err := def.Marshal()
	if err != nil {
		return false, fmt.Errorf("encode domain XML of %s: %w", name, err)
	}
	if _, err := l.DomainDefineXMLFlags(out, libvirt.DomainDefineValidate); err != nil {
		return false, fmt.Errorf("define %s: %w", name, err)
	}
	return true, nil
}
