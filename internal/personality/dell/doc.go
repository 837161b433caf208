// Package dell is what Dell's iDRAC 9 and 10 add to Redfish, as Ironic's
// idrac hardware type drives it through sushy-oem-idrac: the Server
// Configuration Profile (SCP: scp.go), what its attributes mean for a
// machine (config.go: the boot override of the iDRAC component, the BIOS
// attributes and the UEFI boot sequence of the BIOS component, the NICs'
// boot protocol), the jobs an import or export is (job.go: the Task and
// the DellJob views, the message ids clients read), and the bodies of the
// Dell resources under the Manager (resources.go: the OEM actions, the job
// service, the Lifecycle Controller service, the iDRAC card service).
//
// It holds no state and changes none: the Redfish face
// (internal/redfish, oem_dell.go) serves these resources for machines of a
// Dell personality, and changes the machine through the machine model
// (machine.Service.ApplyConfiguration, ClearJobs, ResetBMC).
//
// The generations differ in the SCP's ShareParameters.Target: iDRAC 9
// takes a string ("ALL", or "IDRAC,BIOS"), iDRAC 10 a list (["ALL"]);
// redhat-performance/jetlag PR 878 sends ["ALL"] to iDRAC 10 and "ALL" to
// iDRAC 9. Which form a BMC refuses is the personality's quirk
// scp-target-list (on for idrac10). What is served, what is refused and
// the sources: docs/personalities.md.
package dell
