// Package personality says how a vendor's BMC looks and misbehaves: Dell's
// iDRAC 9 and 10, HPE's iLO 6, Supermicro's X13, and the generic BMC vbmcd
// has always been. A personality is plain data (Manufacturer, Model, firmware
// strings, the ids a one-system BMC gives its resources, the virtual media
// members by the vendor's ids and where they hang) plus the Oem blocks the
// vendors' clients read (oem.go); quirks.go lists the vendors' misbehaviours
// with their public records, each a switch a personality turns on by
// default.
//
// A machine records its personality and its quirk switches with its other
// settings (machine.Settings.Personality and Quirks); the Redfish face reads
// them and shapes what it serves (internal/redfish, persona.go). This package
// knows no protocol and changes no state: it sits over the faces, never
// inside the machine model. What a vendor's BMC serves besides the
// standard resources lives in the vendor's own package: dell (the Server
// Configuration Profile and the jobs of Dell's OEM, which Ironic's idrac
// hardware type drives through sushy-oem-idrac) and hpe (iLO's RIBCL, which
// proliantutils drives a Gen11 through); the Redfish face serves them for
// the personalities that say so (DellOEM, RIBCL). The vendors' facts and
// their sources: docs/personalities.md.
package personality
