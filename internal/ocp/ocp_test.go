package ocp

import (
	"strings"
	"testing"
)

// TestBMCAddress: each BMC kind's bmc.address, as install-config takes
// it, and the errors of an address that cannot be made.
func TestBMCAddress(t *testing.T) {
	const uuid = "7d2bd0a4-5a4e-4c9b-9d0e-000000000001"
	tests := []struct {
		bmc    BMCEndpoint
		system string
		port   int
		want   string
	}{
		{BMCEndpoint{Kind: "redfish-virtualmedia", Host: "192.168.111.1", RedfishPort: 8000, TLS: true}, uuid, 0,
			"redfish-virtualmedia+https://192.168.111.1:8000/redfish/v1/Systems/" + uuid},
		{BMCEndpoint{Kind: "redfish", Host: "bmc.lab", RedfishPort: 8080}, uuid, 0,
			"redfish+http://bmc.lab:8080/redfish/v1/Systems/" + uuid},
		{BMCEndpoint{Kind: "redfish-virtualmedia", Host: "fd00::1", RedfishPort: 8000, TLS: true}, uuid, 0,
			"redfish-virtualmedia+https://[fd00::1]:8000/redfish/v1/Systems/" + uuid},
		{BMCEndpoint{Kind: "ipmi", Host: "192.168.111.1"}, uuid, 6231, "ipmi://192.168.111.1:6231"},
		// A vendor's BMC of its own: the vendor's System id, no port.
		{BMCEndpoint{Kind: "idrac-virtualmedia", Host: "10.1.1.3", TLS: true, OwnAddress: true}, "System.Embedded.1", 0,
			"idrac-virtualmedia+https://10.1.1.3/redfish/v1/Systems/System.Embedded.1"},
		{BMCEndpoint{Kind: "redfish-virtualmedia", Host: "fd00::3", TLS: true, OwnAddress: true}, "1", 0,
			"redfish-virtualmedia+https://[fd00::3]/redfish/v1/Systems/1"},
		{BMCEndpoint{Kind: "ilo5", Host: "10.1.1.4", TLS: true, OwnAddress: true}, "1", 0, "ilo5://10.1.1.4"},
		{BMCEndpoint{Kind: "ilo5", Host: "fd00::4", TLS: true, OwnAddress: true}, "1", 0, "ilo5://[fd00::4]"},
		{BMCEndpoint{Kind: "ilo5", Host: "10.1.1.1", RedfishPort: 8000, TLS: true}, "", 0, "ilo5://10.1.1.1:8000"},
	}
	for _, tt := range tests {
		got, err := BMCAddress(tt.bmc, tt.system, tt.port)
		if err != nil || got != tt.want {
			t.Errorf("BMCAddress(%+v, %s, %d) = %q, %v; want %q", tt.bmc, tt.system, tt.port, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		bmc  BMCEndpoint
		uuid string
		port int
		want string
	}{
		{BMCEndpoint{Kind: "redfish"}, "", 0, "needs the node's System id"},
		{BMCEndpoint{Kind: "ipmi"}, uuid, 70000, "IPMI port 70000 is not a port"},
		{BMCEndpoint{Kind: "idrac"}, uuid, 0, `unknown BMC kind "idrac"`},
		{BMCEndpoint{Kind: "ilo5", Host: "10.1.1.4", OwnAddress: true}, "", 0, "ilo5 is HTTPS only"},
	} {
		if _, err := BMCAddress(tt.bmc, tt.uuid, tt.port); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("BMCAddress(%+v) = %v, want an error containing %q", tt.bmc, err, tt.want)
		}
	}
}

func TestAgentISOName(t *testing.T) {
	for arch, want := range map[string]string{"": "agent.x86_64.iso", "aarch64": "agent.aarch64.iso"} {
		if got := AgentISOName(arch); got != want {
			t.Errorf("AgentISOName(%q) = %q, want %q", arch, got, want)
		}
	}
}
