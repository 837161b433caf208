package dell

import (
	"strings"

	"github.com/bmlab/bmlab/internal/machine"
)

// The Dell resources under the Manager, at the paths iDRAC 9 (firmware 5
// and later) and iDRAC 10 serve them: /redfish/v1/Managers/iDRAC.Embedded.1
// /Oem/Dell/DellJobService, DellLCService, DelliDRACCardService and Jobs,
// linked from the Manager's Links.Oem.Dell (sushy-oem-idrac 5.0 follows
// those links; quadsproject/badfish issue 578: iDRAC 10 serves no
// /redfish/v1/Dell namespace). Only what vbmcd carries out is named: no
// link or action to a resource it does not have.

// Action and resource paths under a Manager's URI.
const (
	ImportAction     = "/Actions/Oem/EID_674_Manager.ImportSystemConfiguration"
	ExportAction     = "/Actions/Oem/EID_674_Manager.ExportSystemConfiguration"
	JobServicePath   = "/Oem/Dell/DellJobService"
	DeleteJobsAction = JobServicePath + "/Actions/DellJobService.DeleteJobQueue"
	LCServicePath    = "/Oem/Dell/DellLCService"
	LCStatusName     = "DellLCService.GetRemoteServicesAPIStatus"
	LCStatusAction   = LCServicePath + "/Actions/" + LCStatusName
	CardServicePath  = "/Oem/Dell/DelliDRACCardService"
	CardResetAction  = CardServicePath + "/Actions/DelliDRACCardService.iDRACReset"
	JobsPath         = "/Oem/Dell/Jobs"
)

// Import and export parameters' allowed values (sushy-oem-idrac reads
// ShutdownType, ExportUse, IncludeInExport and ShareParameters.Target
// from the actions' AllowableValues before it posts).
var (
	ShutdownTypes   = []string{"Graceful", "Forced", "NoReboot"}
	ExportFormats   = []string{"XML", "JSON"}
	ExportUses      = []string{"Default", "Clone", "Replace"}
	IncludeInExport = []string{"Default", "IncludeReadOnly", "IncludePasswordHashValues", "IncludeReadOnly,IncludePasswordHashValues"}
	HostPowerStates = []string{"On", "Off"}
	// ShareTypes: vbmcd takes the profile in the request (ImportBuffer)
	// and answers an export in the task; it fetches from no share.
	ShareTypes  = []string{"LOCAL"}
	ResetForces = []string{"Graceful", "Force"}
)

// ManagerActions are the Manager's Actions.Oem.
func ManagerActions(managerURI string) obj {
	share := obj{
		"Target@Redfish.AllowableValues":    Targets,
		"ShareType@Redfish.AllowableValues": ShareTypes,
	}
	return obj{
		"OemManager.v1_4_0#OemManager.ImportSystemConfiguration": obj{
			"target":                                 managerURI + ImportAction,
			"ShutdownType@Redfish.AllowableValues":   ShutdownTypes,
			"HostPowerState@Redfish.AllowableValues": HostPowerStates,
			"ImportSystemConfiguration@Redfish.AllowableValues": []string{
				"TimeToWait", "ImportBuffer",
			},
			"ShareParameters": share,
		},
		"OemManager.v1_4_0#OemManager.ExportSystemConfiguration": obj{
			"target":                                  managerURI + ExportAction,
			"ExportFormat@Redfish.AllowableValues":    ExportFormats,
			"ExportUse@Redfish.AllowableValues":       ExportUses,
			"IncludeInExport@Redfish.AllowableValues": IncludeInExport,
			"ShareParameters":                         share,
		},
	}
}

// ManagerLinks are the Manager's Links.Oem.
func ManagerLinks(managerURI string) obj {
	return obj{"Dell": obj{
		"@odata.type":          "#DellOem.v1_3_0.DellOemLinks",
		"DellJobService":       obj{"@odata.id": managerURI + JobServicePath},
		"DellLCService":        obj{"@odata.id": managerURI + LCServicePath},
		"DelliDRACCardService": obj{"@odata.id": managerURI + CardServicePath},
		"Jobs":                 obj{"@odata.id": managerURI + JobsPath},
	}}
}

// JobService is the DellJobService.
func JobService(managerURI string) obj {
	return service(managerURI, JobServicePath, "#DellJobService.v1_6_0.DellJobService", obj{
		"#DellJobService.DeleteJobQueue": obj{"target": managerURI + DeleteJobsAction},
	})
}

// LCService is the DellLCService (the Lifecycle Controller) at uri (the
// Manager's URI + LCServicePath, or the older
// /redfish/v1/Dell/Managers/{id}/DellLCService): its status action, and
// the actions more names (the screenshot: internal/redfish, screen.go).
func LCService(uri string, more obj) obj {
	actions := obj{"#" + LCStatusName: obj{"target": uri + "/Actions/" + LCStatusName}}
	for k, v := range more {
		actions[k] = v
	}
	o := service(uri, "", "#DellLCService.v1_8_1.DellLCService", actions)
	o["Description"] = "The DellLCService resource provides some actions to support Lifecycle Controller functionality."
	return o
}

// CardService is the DelliDRACCardService.
func CardService(managerURI string) obj {
	return service(managerURI, CardServicePath, "#DelliDRACCardService.v1_6_0.DelliDRACCardService", obj{
		"#DelliDRACCardService.iDRACReset": obj{
			"target":                        managerURI + CardResetAction,
			"Force@Redfish.AllowableValues": ResetForces,
		},
	})
}

// service is one of the Dell services under a Manager: its Id and Name
// are the last segment of its path.
func service(managerURI, path, odataType string, actions obj) obj {
	u := managerURI + path
	id := u[strings.LastIndex(u, "/")+1:]
	return obj{
		"@odata.id":   u,
		"@odata.type": odataType,
		"Id":          id,
		"Name":        id,
		"Actions":     actions,
	}
}

// LCStatus is what GetRemoteServicesAPIStatus answers: the Lifecycle
// Controller and the real-time services are Ready; ServerStatus says
// whether the server is off, in POST or past it.
func LCStatus(m *machine.Machine, inPost bool) obj {
	server := "OutOfPOST"
	switch {
	case m.Power == machine.PowerOff:
		server = "PoweredOff"
	case inPost:
		server = "InPOST"
	}
	return obj{
		"LCStatus":     "Ready",
		"RTStatus":     "Ready",
		"ServerStatus": server,
		"Status":       "Ready",
	}
}
