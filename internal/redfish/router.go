package redfish

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/metrics"
)

// handlerFunc serves one method of a route; a returned error is written as a
// Redfish error response.
type handlerFunc func(s *Server, c *call) *apiError

// renderFunc builds a resource for a GET; nil means "no such resource".
type renderFunc func(s *Server, c *call) any

// scope says whether, and as what, a route's first parameter names a machine.
type scope int

const (
	scopeNone scope = iota
	scopeSystem
	scopeManager
	scopeChassis
)

// route is one URI pattern under /redfish/v1 and what serves it. A "*"
// segment is a parameter.
type route struct {
	name   string // the URI pattern, * for an id (metrics label)
	segs   []string
	scope  scope
	public string // methods served without authentication ("GET", "POST")

	// render, when set, serves GET from the render cache (keyed by the
	// machine's Generation for scoped routes, once for unscoped ones).
	render renderFunc
	get    handlerFunc
	patch  handlerFunc
	post   handlerFunc
	del    handlerFunc

	// write is the privilege a PATCH, POST or DELETE needs (default
	// ConfigureComponents); a GET needs Login.
	write accounts.Privilege
	// expand: the route's GET takes $expand, which the service otherwise
	// refuses (501).
	expand bool

	allow    string
	allowHdr []string

	// series is, by method (methodIndex), the metrics series of the
	// status this route last answered that method with: a request with
	// the same status counts without a lookup (ServeHTTP).
	series *[len(knownMethodList)]atomic.Pointer[routeSeries]
}

// routeSeries is a status code's metrics series.
type routeSeries struct {
	code int
	s    *metrics.RedfishSeries
}

// need is the privilege method needs on this route (DSP0266 §13.2; the
// Redfish Privilege Registry's defaults for the resources served).
func (rt *route) need(method string) accounts.Privilege {
	if method == http.MethodGet {
		return accounts.Login
	}
	if rt.write != 0 {
		return rt.write
	}
	return accounts.ConfigureComponents
}

// call is the state of one request.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	path   string // canonical path: no trailing slash except the root's
	params [4]string
	np     int
	rt     *route

	who     *principal
	session *session
	m       *machine.Machine

	// bmc is the system whose own BMC the request came in through
	// (AtBMC), "" on the service's listener.
	bmc string
	// view maps the machine's ids to its vendor's at such a BMC
	// (vendorids.go); nil elsewhere.
	view *idView

	// rec records the status for the log and the metrics (ServeHTTP),
	// kept here so that a request allocates one call, not two.
	rec statusRecorder
}

func (rt *route) handler(method string) handlerFunc {
	switch method {
	case http.MethodGet:
		if rt.render != nil {
			return serveCached
		}
		return rt.get
	case http.MethodPatch:
		return rt.patch
	case http.MethodPost:
		return rt.post
	case http.MethodDelete:
		return rt.del
	}
	return nil
}

func (rt *route) finish() *route {
	rt.series = new([len(knownMethodList)]atomic.Pointer[routeSeries])
	var ms []string
	if rt.render != nil || rt.get != nil {
		ms = append(ms, "GET", "HEAD")
	}
	if rt.patch != nil {
		ms = append(ms, "PATCH")
	}
	if rt.post != nil {
		ms = append(ms, "POST")
	}
	if rt.del != nil {
		ms = append(ms, "DELETE")
	}
	rt.allow = strings.Join(ms, ", ")
	rt.allowHdr = []string{rt.allow}
	return rt
}

// uriFor builds the route's URI for a machine id and further parameters.
func (rt *route) uriFor(id string, rest []string) string {
	var b strings.Builder
	b.WriteString(rootURI)
	for _, seg := range rt.segs {
		b.WriteByte('/')
		if seg == "*" {
			if id != "" {
				b.WriteString(id)
				id = ""
				continue
			}
			b.WriteString(rest[0])
			rest = rest[1:]
			continue
		}
		b.WriteString(seg)
	}
	return b.String()
}

// match finds the route of c.path and fills c.params; nil when none matches.
func (s *Server) match(c *call) *route {
	p := c.path
	if p == "/redfish" {
		c.rt = versionRoute
		return c.rt
	}
	if p == rootURI+"/" {
		c.rt = s.routes[0]
		return c.rt
	}
	rest, ok := strings.CutPrefix(p, rootURI+"/")
	if !ok {
		return nil
	}
	for _, rt := range s.routes[1:] {
		if matchSegs(rt.segs, rest, c) {
			c.rt = rt
			return rt
		}
	}
	return nil
}

func matchSegs(segs []string, rest string, c *call) bool {
	n := 0
	for i, seg := range segs {
		var part string
		var more bool
		part, rest, more = strings.Cut(rest, "/")
		if part == "" || (more && i == len(segs)-1) || (!more && i < len(segs)-1) {
			return false
		}
		if seg == "*" {
			if n == len(c.params) {
				return false
			}
			c.params[n] = part
			n++
			continue
		}
		if part != seg {
			return false
		}
	}
	c.np = n
	return true
}

func r(path string, rt route) *route {
	rt.name = "/redfish/v1/" + path
	if path != "" {
		rt.segs = strings.Split(path, "/")
	} else {
		rt.name = "/redfish"
	}
	switch {
	case strings.HasPrefix(path, "Systems/*"):
		rt.scope = scopeSystem
	case strings.HasPrefix(path, "Managers/*"), strings.HasPrefix(path, "Dell/Managers/*"):
		rt.scope = scopeManager
	case strings.HasPrefix(path, "Chassis/*"):
		rt.scope = scopeChassis
	}
	return rt.finish()
}

var versionRoute = r("", route{public: "GET", get: getVersions})

// mediaRoutes are the virtual media resources under base (a Manager or a
// System): they change with tasks as well as with the machine, so they are
// not served from the render cache.
func mediaRoutes(base string) []*route {
	return []*route{
		r(base+"/VirtualMedia", route{get: getVirtualMediaCollection}),
		r(base+"/VirtualMedia/*", route{get: getVirtualMedia, patch: patchVirtualMedia}),
		r(base+"/VirtualMedia/*/Actions/"+insertAction, route{post: postInsertMedia}),
		r(base+"/VirtualMedia/*/Actions/"+ejectAction, route{post: postEjectMedia}),
		r(base+"/VirtualMedia/*/Certificates", route{get: getMediaCertificates, post: postMediaCertificate}),
		r(base+"/VirtualMedia/*/Certificates/*", route{get: getMediaCertificate, del: deleteMediaCertificate}),
	}
}

// table lists every resource of the service. The first entry is the service
// root.
func (s *Server) table() []*route {
	routes := []*route{
		r("", route{public: "GET", render: renderStatic(func(s *Server) any { return serviceRoot(s.id) })}),
		r("odata", route{public: "GET", render: renderStatic(func(*Server) any { return odataDocument() })}),
		r("$metadata", route{public: "GET", render: renderMetadata}),

		r("Systems", route{get: getSystems}),
		r("Systems/*", route{render: renderSystem, patch: quirked(patchSystem, false)}),
		r("Systems/*/Actions/ComputerSystem.Reset", route{post: postReset}),
		r("Systems/*/Processors", route{render: renderProcessors}),
		r("Systems/*/Processors/*", route{render: renderProcessor}),
		r("Systems/*/Memory", route{render: renderMemories}),
		r("Systems/*/Memory/*", route{render: renderMemory}),
		r("Systems/*/EthernetInterfaces", route{render: renderNICs}),
		r("Systems/*/EthernetInterfaces/*", route{render: renderNIC}),
		r("Systems/*/SimpleStorage", route{render: renderSimpleStorages}),
		r("Systems/*/SimpleStorage/*", route{render: renderSimpleStorage}),
		r("Systems/*/Storage", route{render: renderStorages}),
		r("Systems/*/Storage/*", route{render: renderStorage}),
		r("Systems/*/Storage/*/Drives/*", route{render: renderDrive}),
		r("Systems/*/Storage/*/Controllers", route{render: renderStorageControllers}),
		r("Systems/*/Storage/*/Controllers/*", route{render: renderStorageController}),
		r("Systems/*/Storage/*/Volumes", route{render: renderVolumes, post: postVolume}),
		r("Systems/*/Storage/*/Volumes/*", route{render: renderVolume, del: deleteVolume}),
		r("Systems/*/SecureBoot", route{render: renderSecureBoot, patch: patchSecureBoot}),
		r("Systems/*/SecureBoot/Actions/SecureBoot.ResetKeys", route{post: postResetKeys}),
		r("Systems/*/SecureBoot/SecureBootDatabases", route{render: renderKeyDatabases}),
		r("Systems/*/SecureBoot/SecureBootDatabases/*", route{render: renderKeyDatabase}),
		r("Systems/*/SecureBoot/SecureBootDatabases/*/Actions/SecureBootDatabase.ResetKeys", route{post: postDatabaseResetKeys}),
		r("Systems/*/SecureBoot/SecureBootDatabases/*/Certificates", route{render: renderKeyCertificates}),
		r("Systems/*/SecureBoot/SecureBootDatabases/*/Certificates/*", route{render: renderKeyCertificate}),
		r("Systems/*/SecureBoot/SecureBootDatabases/*/Signatures", route{render: renderKeySignatures}),
		r("Systems/*/SecureBoot/SecureBootDatabases/*/Signatures/*", route{render: renderKeySignature}),
		r("Systems/*/BootOptions", route{render: renderBootOptions}),
		r("Systems/*/BootOptions/*", route{render: renderBootOption}),
		r("Systems/*/Bios", route{render: renderBios}),
		r("Systems/*/Bios/Settings", route{render: renderBiosSettings, patch: quirked(patchBiosSettings, true)}),
		r("Systems/*/Bios/Actions/Bios.ResetBios", route{post: postResetBios}),

		r("Managers", route{get: getManagers}),
		r("Managers/*", route{get: getManager, patch: patchManager, write: accounts.ConfigureManager}),
		r("Managers/*/Actions/Manager.Reset", route{post: postManagerReset, write: accounts.ConfigureManager}),
		r("Chassis", route{get: getChassisCollection}),
		r("Chassis/*", route{render: renderChassis}),
		r("Chassis/*/Thermal", route{render: renderThermal}),
		r("Chassis/*/Power", route{render: renderPower}),
		r("Chassis/*/PCIeDevices", route{render: renderPCIeDevices}),
		r("Chassis/*/PCIeDevices/*", route{render: renderPCIeDevice}),
		r("Chassis/*/PCIeDevices/*/PCIeFunctions", route{render: renderPCIeFunctions}),
		r("Chassis/*/PCIeDevices/*/PCIeFunctions/*", route{render: renderPCIeFunction}),
		r("Chassis/*/NetworkAdapters", route{render: renderNetworkAdapters}),
		r("Chassis/*/NetworkAdapters/*", route{render: renderNetworkAdapter}),
		r("Chassis/*/NetworkAdapters/*/Ports", route{render: renderPorts}),
		r("Chassis/*/NetworkAdapters/*/Ports/*", route{render: renderPort}),

		r("SessionService", route{render: renderStatic(func(s *Server) any { return sessionService(s.id) })}),
		r("SessionService/Sessions", route{public: "POST", get: getSessions, post: postSession}),
		r("SessionService/Sessions/*", route{get: getSession, del: deleteSession, write: accounts.Login}),
		r("AccountService", route{get: getAccountService, patch: patchAccountService, write: accounts.ConfigureUsers}),
		r("AccountService/Accounts", route{get: getAccounts, post: postAccount, write: accounts.ConfigureUsers}),
		r("AccountService/Accounts/*", route{get: getAccount, patch: patchAccount, del: deleteAccount, write: accounts.ConfigureSelf}),
		r("AccountService/Roles", route{render: renderStatic(func(*Server) any { return roleCollection() })}),
		r("AccountService/Roles/*", route{get: getRole}),
		r("TaskService", route{render: renderStatic(func(*Server) any { return taskService() })}),
		r("TaskService/Tasks", route{get: getTasks}),
		r("TaskService/Tasks/*", route{get: getTask}),
		r("TaskService/TaskMonitors/*", route{get: getTaskMonitor}),

		r("UpdateService", route{render: renderStatic(func(*Server) any { return updateService() })}),
		r("UpdateService/Actions/"+simpleUpdateAction, route{post: postSimpleUpdate}),
		r("UpdateService/FirmwareInventory", route{get: getFirmwareInventory}),
		r("UpdateService/FirmwareInventory/*", route{get: getFirmwareItem}),

		r("Registries", route{render: renderStatic(func(*Server) any {
			return collection(registriesURI, "MessageRegistryFileCollection", "Registry File Collection",
				[]string{baseFileURI, updateFileURI, biosRegFileURI})
		})}),
		r("Registries/"+updateRegistryPrefix, route{render: renderStatic(func(*Server) any {
			return registryFile(updateRegistryPrefix, updateRegistryID, updateRegistryURI)
		})}),
		r("Registries/"+updateRegistryPrefix+"/"+updateRegistryID, route{render: renderStatic(func(*Server) any { return updateRegistryBody() })}),
		r("Registries/"+baseRegistryPrefix, route{render: renderStatic(func(*Server) any {
			return registryFile(baseRegistryPrefix, baseRegistryID, registryURI)
		})}),
		r("Registries/"+baseRegistryPrefix+"/"+baseRegistryID, route{render: renderStatic(func(*Server) any { return registryBody() })}),
		r("Registries/"+biosRegistryPrefix, route{render: renderStatic(func(*Server) any {
			return registryFile(biosRegistryPrefix, biosRegistryID, biosRegistryURI)
		})}),
		r("Registries/"+biosRegistryPrefix+"/"+biosRegistryID, route{render: renderStatic(func(*Server) any { return biosRegistry() })}),
	}
	routes = append(routes, eventRoutes()...)
	routes = append(routes, vendorRoutes()...)
	routes = append(routes, dellRoutes()...)
	routes = append(routes, screenRoutes()...)
	routes = append(routes, mediaRoutes("Managers/*")...)
	return append(routes, mediaRoutes("Systems/*")...)
}
