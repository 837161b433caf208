package labvirt

import (
	"encoding/xml"
	"strings"
)

// MarkNS is the XML namespace of the lab's ownership mark. Domains and
// networks carry the mark in their <metadata> (MarkXML); storage pools, which
// have no metadata in libvirt 9.0, carry it in a file in their directory
// (PoolMarkFile), with the same element. The mark is what `labctl down` looks
// for; nothing without it is ever changed or removed.
const MarkNS = "http://bmlab.dev/xmlns/lab/1"

// MarkXML is the mark of lab, as an element for <metadata>, with extra
// attributes given as name, value pairs (what other labs need to know of
// this one, such as the VIPs it holds on its network).
func MarkXML(lab string, attrs ...string) string {
	var b strings.Builder
	b.WriteString(`<lab xmlns="`)
	_ = xml.EscapeText(&b, []byte(MarkNS))
	b.WriteString(`" name="`)
	_ = xml.EscapeText(&b, []byte(lab))
	b.WriteString(`"`)
	for i := 0; i+1 < len(attrs); i += 2 {
		b.WriteString(" " + attrs[i] + `="`)
		_ = xml.EscapeText(&b, []byte(attrs[i+1]))
		b.WriteString(`"`)
	}
	b.WriteString(`/>`)
	return b.String()
}

// MarkAttrs returns the attributes of the first mark in a <metadata>
// fragment, name included; nil when there is none.
func MarkAttrs(inner string) map[string]string {
	d := xml.NewDecoder(strings.NewReader("<m>" + inner + "</m>"))
	for {
		tok, err := d.Token()
		if err != nil {
			return nil
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Space == MarkNS && se.Name.Local == "lab" {
			out := map[string]string{}
			for _, a := range se.Attr {
				if a.Name.Space == "" {
					out[a.Name.Local] = a.Value
				}
			}
			return out
		}
	}
}

// MarkOf returns the lab named by the first mark in a <metadata> fragment,
// or "" when there is none (the object is foreign). Other applications'
// elements beside the mark are ignored.
func MarkOf(inner string) string { return MarkAttrs(inner)["name"] }
