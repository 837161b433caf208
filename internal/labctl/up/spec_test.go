package up

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/labconfig"
)

func TestSpecFromConfig(t *testing.T) {
	cfg, err := labconfig.Parse([]byte("apiVersion: bmlab.dev/v1alpha1\nkind: Lab\nname: s\ncluster:\n  masters: {count: 1, extraDisks: [10, 20]}\n  workers: {count: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := SpecFromConfig(cfg, "/labs/s", "/bin/vbmcd")
	type node struct {
		Name, Role string
		Mem, Disk  uint
		Extra      []uint
	}
	var got []node
	for _, n := range s.Nodes {
		got = append(got, node{n.Name, n.Role, n.MemoryMiB, n.DiskGiB, n.ExtraDiskGiB})
		if n.MAC == "" || n.UUID == "" {
			t.Errorf("%s: MAC %q UUID %q not derived", n.Name, n.MAC, n.UUID)
		}
	}
	want := []node{
		{"s-master-0", "master", 16384, 120, []uint{10, 20}},
		{"s-worker-0", "worker", 8192, 120, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if s.BMC.Kind != labconfig.BMCRedfishVirtualMedia || s.BMC.RedfishPort != 8000 {
		t.Errorf("BMC %+v", s.BMC)
	}
	if own := ownNAT(cfg); !own || cfg.Network.LibvirtBridge != "bmnat-s" || cfg.Network.Veths[0].PeerMaster != "bmnat-s" {
		t.Errorf("own NAT %v: bridge %s veths %+v", own, cfg.Network.LibvirtBridge, cfg.Network.Veths)
	}
}
