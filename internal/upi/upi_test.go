package upi

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/testenv"
)

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testenv.Golden(t, filepath.Join("testdata", name), got)
}

const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBmlabTestKeyForTheHybridFlowOnly lab@bmlab"

// testCluster is a cluster with a bootstrap, three masters and workers
// (none when workers is 0).
func testCluster(workers int) Cluster {
	c := Cluster{
		Name:       "hyb",
		BaseDomain: "lab.test",
		Family: netaddr.Family{
			MachineNetwork: netip.MustParsePrefix("10.17.0.0/24"),
			APIVIP:         netip.MustParseAddr("10.17.0.5"),
			IngressVIP:     netip.MustParseAddr("10.17.0.6"),
		},
		APIRouterID:     17,
		IngressRouterID: 18,
		Upstream:        []netip.Addr{netip.MustParseAddr("10.17.0.1")},
		SSHKey:          testSSHKey + "\n",
		Images:          Images{Keepalived: "quay.io/k:1", CoreDNS: "quay.io/c:1", HAProxy: "quay.io/h:1"},
		Nodes: []Node{
			{Name: "hyb-bootstrap", Role: ocp.RoleBootstrap, IP: netip.MustParseAddr("10.17.0.10"), MAC: "52:54:00:00:00:10"},
			{Name: "hyb-master-0", Role: ocp.RoleMaster, IP: netip.MustParseAddr("10.17.0.11"), MAC: "52:54:00:00:00:11"},
			{Name: "hyb-master-1", Role: ocp.RoleMaster, IP: netip.MustParseAddr("10.17.0.12"), MAC: "52:54:00:00:00:12"},
			{Name: "hyb-master-2", Role: ocp.RoleMaster, IP: netip.MustParseAddr("10.17.0.13"), MAC: "52:54:00:00:00:13"},
		},
	}
	for i := range workers {
		a := netip.AddrFrom4([4]byte{10, 17, 0, byte(20 + i)})
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprintf("hyb-worker-%d", i), Role: ocp.RoleWorker, IP: a, MAC: fmt.Sprintf("52:54:00:00:00:%d", 20+i)})
	}
	return c
}

// nodeOf returns c's first node of role.
func nodeOf(c Cluster, role string) Node {
	for _, n := range c.Nodes {
		if n.Role == role {
			return n
		}
	}
	panic("no " + role)
}

// installConfigYAML is an install-config for the fixture installer:
// cluster hyb.lab.test, three masters, platform none.
func installConfigYAML(workers int) string {
	return `apiVersion: v1
baseDomain: lab.test
metadata:
  name: hyb
controlPlane:
  name: master
  replicas: 3
compute:
- name: worker
  replicas: ` + strconv.Itoa(workers) + `
networking:
  machineNetwork:
  - cidr: 10.17.0.0/24
platform:
  none: {}
pullSecret: '{"auths":{"registry.lab.test":{"auth":"Zml4dHVyZTpmaXh0dXJl"}}}'
sshKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIInstallerKeyOfTheFixture installer@bmlab
`
}
