// Package personality says how a vendor's BMC looks and misbehaves: Dell's
// iDRAC 9 and 10, HPE's iLO 6, Supermicro's X13, and the generic BMC vbmcd
// has always been. A personality is plain data (Manufacturer and its IPMI
// manufacturer ID, Model, firmware strings, the ids a one-system BMC gives its resources, the virtual media
// members by the vendor's ids and where they hang) plus the Oem blocks the
// vendors' clients read (oem.go); quirks.go lists the vendors' misbehaviours
// with their public records, each a switch a personality turns on by
// default. What a vendor adds to the standard resources is in its entry
// too: its Oem blocks are its own functions (Personality.Oem, oem.go), so
// nothing here or in the faces switches on a vendor's name.
//
// The package's list (personality.go) is the default and holds every
// vendor vbmcd ships. Register adds one declared elsewhere, after them, to
// the same list every face and check already reads by name (Lookup,
// Names): a test's vendor (TestAPersonalityOfItsOwn), or one a build adds
// in an init function. It is a hook on the package's one list rather than
// a list passed to each face because the lab file's checks, vbmcd's flags,
// the plan and the Redfish and IPMI faces all look personalities up by the
// name a machine records; a list of their own would be one more option on
// each of them and one more way for two of them to disagree. Register
// refuses a taken name, a name a lab file could not spell and an entry
// that is not whole, and never removes one.
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
