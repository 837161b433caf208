// Package redfish is the Redfish face of vbmcd: one HTTP handler that serves
// every machine of a machine.Service as a ComputerSystem with its Manager and
// Chassis, plus the service-wide resources (SessionService, AccountService,
// EventService, TaskService, UpdateService, Registries, $metadata).
//
// Under each system: boot override and ComputerSystem.Reset, Bios and its
// pending Settings, SecureBoot with its key databases (when the backend is
// a machine.KeyStorer), Storage (drives and RAID volumes), Processors,
// Memory, EthernetInterfaces, and the Chassis' PCIe devices, network
// adapters, Power and Thermal sensors. Virtual media (InsertMedia,
// EjectMedia, PATCH of Image and Inserted, a task for a long download)
// hangs under the Manager, where sushy and Ironic look, and under
// the System, for newer clients; both show the same members (vmedia.go).
// Events (events.go) go to subscribers as the machines change, whichever
// face changed them, only to addresses vbmcd's outbound policy allows
// (internal/netpolicy, the image fetcher's too); firmware updates (update.go) are SimpleUpdate with a
// task.
//
// A machine's personality (internal/personality; its settings name it, else
// WithPersonality's) makes its BMC look like a vendor's: Manufacturer, Model,
// firmware strings, Oem blocks, virtual media members by the vendor's ids
// and only where the vendor hangs them, and the vendor's own actions its Oem
// blocks name (persona.go); its quirks change how some requests are
// answered. Each Manager has the hands-free console (screen.go): a
// screenshot (Dell's DellLCService.ExportServerScreenShot on a Dell
// personality, vbmcd's Bmlab.ExportScreenShot on the others), keys typed
// (Bmlab.SendKeys, stopped at the next key when its caller loses the
// right) and the serial output (Bmlab.ExportSerialData). System, Manager
// and Chassis keep the machine's id on this listener. The vendors' own
// interfaces, as their Ironic drivers drive them: Dell's OEM (oem_dell.go,
// internal/personality/dell: the Server Configuration Profile's import and
// export, each a job whose Task is its task monitor, the job queue and job
// service, the Lifecycle Controller's status and screenshot, the iDRAC
// card's reset) and HPE's RIBCL (oem_hpe.go, internal/personality/hpe:
// POST /ribcl at an iLO's own BMC, with its own login).
//
// Resources are built by small pure functions from a machine snapshot
// (resources.go); a rendered body is cached by (URI, machine Generation), so a
// GET of an unchanged resource is a map lookup and a write, and its ETag is
// computed once per render. Writes (PATCH, actions) are validated here
// (property names, types, enums, duplicate keys, a PATCH that changes
// nothing, with Base registry messages; bodies read as they arrive, charged
// to the listener's budget (internal/admission), and with messages and
// echoed values bounded, patch.go and messages.go; a POST or PATCH must
// name a JSON Content-Type) and carried out
// by the machine model, which owns the BMC semantics (Once/Continuous boot
// overrides, pending BIOS settings, secure boot at the next start, media
// changes live on a running machine).
//
// Authentication is HTTP Basic or a Redfish session (X-Auth-Token). The
// service-wide credentials, and the users of an htpasswd file
// (WithHtpasswd), reach every system; a machine's own credentials
// (machine.Settings.Credentials) reach that system, its Manager and Chassis
// only, and collections list only what the caller may see. Accounts and
// roles come from internal/accounts; an account bound to a system changes
// nothing service-wide (the lockout policy, the event retry settings). A
// connection marked with AtBMC is a server's own BMC: whoever logs in sees
// that one system, and that BMC's sessions, accounts, subscriptions, tasks
// and firmware; SimpleUpdate without Targets updates it. A machine of a
// vendor personality is served there under the vendor's ids
// (System.Embedded.1, /Systems/1: vendorids.go maps paths, the references
// of a body once read within its budget, and answers and Location headers
// both ways; the shared listener keeps machine ids). Event destinations are
// held to WithEventPolicy, which for loopback vbmcd gives a flag of its own.
// Sessions are shared with the web console (caller.go: SessionCaller,
// SessionState, and Changed, which tells it at once when a session ends or
// an account changes), each with the BMC it was made on. Refused logins
// are logged rate-limited.
//
// What it does not do: talk to a hypervisor or decide BMC semantics. It does
// not listen either: the caller wraps Handler in an http.Server, with
// TLSConfig (a self-signed pair kept in the state directory, or the
// caller's, and ApplyTLSPolicy's minimum version and cipher suites) for
// HTTPS.
package redfish
