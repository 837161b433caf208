package dell

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
)

// A Server Configuration Profile (SCP) as iDRAC exports and imports it:
// components by FQDD, each a list of named attributes with string values.
// In XML:
//
//	<SystemConfiguration Model="…" ServiceTag="…" TimeStamp="…">
//	  <Component FQDD="BIOS.Setup.1-1">
//	    <Attribute Name="ProcVirtualization">Enabled</Attribute>
//	  </Component>
//	</SystemConfiguration>
//
// and in JSON, {"SystemConfiguration": {"Model": …, "Components": [{"FQDD":
// …, "Attributes": [{"Name": …, "Value": …, "Set On Import": "True",
// "Comment": "Read and Write"}]}]}} (Dell's iDRAC-Redfish-Scripting
// ExportSystemConfigurationLocalREDFISH.py and ImportSystemConfigurationLocal
// REDFISH.py; sushy-oem-idrac 5.0 reads SystemConfiguration.Components[].
// FQDD and Attributes[].Name and Value of a JSON export).

// Profile is one SCP.
type Profile struct {
	Model, ServiceTag, TimeStamp string
	Components                   []Component
}

// Component is one device's attributes.
type Component struct {
	FQDD       string
	Attributes []Attribute
}

// Attribute is one setting. A read-only one is exported for information
// and not set on import.
type Attribute struct {
	Name, Value string
	ReadOnly    bool
}

// maxProfile bounds an ImportBuffer (the Redfish body is bounded already;
// this bounds what a profile may hold).
const (
	maxComponents = 64
	maxAttributes = 512
)

// ErrProfile is a profile that cannot be read.
var ErrProfile = errors.New("the ImportBuffer is not a Server Configuration Profile")

// ParseProfile reads a profile in XML or JSON, as ImportBuffer carries it.
func ParseProfile(buf string) (Profile, error) {
	s := strings.TrimSpace(buf)
	switch {
	case strings.HasPrefix(s, "<"):
		return parseXML(s)
	case strings.HasPrefix(s, "{"):
		return parseJSON(s)
	}
	return Profile{}, fmt.Errorf("%w: it is neither XML (<SystemConfiguration>) nor JSON ({\"SystemConfiguration\": …})", ErrProfile)
}

type xmlProfile struct {
	XMLName    xml.Name       `xml:"SystemConfiguration"`
	Model      string         `xml:"Model,attr,omitempty"`
	ServiceTag string         `xml:"ServiceTag,attr,omitempty"`
	TimeStamp  string         `xml:"TimeStamp,attr,omitempty"`
	Components []xmlComponent `xml:"Component"`
}

type xmlComponent struct {
	FQDD       string         `xml:"FQDD,attr"`
	Attributes []xmlAttribute `xml:"Attribute"`
}

type xmlAttribute struct {
	Name  string `xml:"Name,attr"`
	Value string `xml:",chardata"`
}

func parseXML(s string) (Profile, error) {
	var x xmlProfile
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = true
	if err := d.Decode(&x); err != nil {
		return Profile{}, fmt.Errorf("%w: %v", ErrProfile, err)
	}
	p := Profile{Model: x.Model, ServiceTag: x.ServiceTag, TimeStamp: x.TimeStamp}
	for _, c := range x.Components {
		comp := Component{FQDD: c.FQDD}
		for _, a := range c.Attributes {
			comp.Attributes = append(comp.Attributes, Attribute{Name: a.Name, Value: a.Value})
		}
		p.Components = append(p.Components, comp)
	}
	return p, p.check()
}

type jsonProfile struct {
	SystemConfiguration *struct {
		Model      string `json:"Model,omitempty"`
		ServiceTag string `json:"ServiceTag,omitempty"`
		TimeStamp  string `json:"TimeStamp,omitempty"`
		Components []struct {
			FQDD       string          `json:"FQDD"`
			Attributes []jsonAttribute `json:"Attributes"`
		} `json:"Components"`
	} `json:"SystemConfiguration"`
}

type jsonAttribute struct {
	Name        string `json:"Name"`
	Value       any    `json:"Value"`
	SetOnImport string `json:"Set On Import,omitempty"`
	Comment     string `json:"Comment,omitempty"`
}

func parseJSON(s string) (Profile, error) {
	var j jsonProfile
	d := json.NewDecoder(strings.NewReader(s))
	if err := d.Decode(&j); err != nil {
		return Profile{}, fmt.Errorf("%w: %v", ErrProfile, err)
	}
	if j.SystemConfiguration == nil {
		return Profile{}, fmt.Errorf("%w: it has no SystemConfiguration", ErrProfile)
	}
	sc := j.SystemConfiguration
	p := Profile{Model: sc.Model, ServiceTag: sc.ServiceTag, TimeStamp: sc.TimeStamp}
	for _, c := range sc.Components {
		comp := Component{FQDD: c.FQDD}
		for _, a := range c.Attributes {
			v, ok := a.Value.(string)
			if !ok && a.Value != nil {
				v = fmt.Sprint(a.Value)
			}
			comp.Attributes = append(comp.Attributes, Attribute{Name: a.Name, Value: v,
				ReadOnly: strings.EqualFold(a.SetOnImport, "False")})
		}
		p.Components = append(p.Components, comp)
	}
	return p, p.check()
}

func (p Profile) check() error {
	if len(p.Components) > maxComponents {
		return fmt.Errorf("%w: %d components, at most %d are taken", ErrProfile, len(p.Components), maxComponents)
	}
	n := 0
	for _, c := range p.Components {
		if c.FQDD == "" {
			return fmt.Errorf("%w: a Component has no FQDD", ErrProfile)
		}
		for _, a := range c.Attributes {
			if a.Name == "" {
				return fmt.Errorf("%w: an Attribute of %s has no Name", ErrProfile, c.FQDD)
			}
		}
		n += len(c.Attributes)
	}
	if n > maxAttributes {
		return fmt.Errorf("%w: %d attributes, at most %d are taken", ErrProfile, n, maxAttributes)
	}
	return nil
}

// JSON is the profile as an export in JSON gives it.
func (p Profile) JSON() map[string]any {
	comps := make([]any, 0, len(p.Components))
	for _, c := range p.Components {
		attrs := make([]any, 0, len(c.Attributes))
		for _, a := range c.Attributes {
			set, comment := "True", "Read and Write"
			if a.ReadOnly {
				set, comment = "False", "Read only"
			}
			attrs = append(attrs, jsonAttribute{Name: a.Name, Value: a.Value, SetOnImport: set, Comment: comment})
		}
		comps = append(comps, map[string]any{"FQDD": c.FQDD, "Attributes": attrs})
	}
	return map[string]any{"SystemConfiguration": map[string]any{
		"Model": p.Model, "ServiceTag": p.ServiceTag, "TimeStamp": p.TimeStamp, "Components": comps,
	}}
}

// XML is the profile as an export in XML gives it; read-only attributes
// are comments, as iDRAC writes them.
func (p Profile) XML() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<SystemConfiguration Model=\"%s\" ServiceTag=\"%s\" TimeStamp=\"%s\">\n", esc(p.Model), esc(p.ServiceTag), esc(p.TimeStamp))
	for _, c := range p.Components {
		fmt.Fprintf(&b, "<Component FQDD=\"%s\">\n", esc(c.FQDD))
		for _, a := range c.Attributes {
			line := fmt.Sprintf("<Attribute Name=\"%s\">%s</Attribute>", esc(a.Name), esc(a.Value))
			if a.ReadOnly {
				line = "<!-- " + line + " -->"
			}
			b.WriteString(line + "\n")
		}
		b.WriteString("</Component>\n")
	}
	b.WriteString("</SystemConfiguration>\n")
	return b.String()
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
