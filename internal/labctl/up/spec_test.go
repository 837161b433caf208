package up

import (
	"os"
	"path/filepath"
	"strings"
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

func TestPrecheckStopsBadLabFilesFirst(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pull-secret.json"), []byte(`{"auths":{"registry.invalid":{"auth":"dTpw"}}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "id.pub"), []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl test\n"), 0o644)
	cfg, err := labconfig.Parse([]byte("apiVersion: bmlab.dev/v1alpha1\nkind: Lab\nname: s\ncluster:\n  sshKey: id.pub\n  apiVIP: 10.1.1.1\n"))
	if err != nil {
		t.Fatal(err)
	}
	steps := []string{"preflight", "network", "storage", "nodes", "bmcs", "install-config", "installer"}
	err = precheck(cfg, &flags{}, dir, steps)
	if err == nil || !strings.Contains(err.Error(), "platform.baremetal.apiVIPs") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("precheck: %v", err)
	}
	// A run that stops before install-config needs neither inputs nor the check.
	if err := precheck(cfg, &flags{until: "nodes"}, t.TempDir(), steps); err != nil {
		t.Errorf("--until nodes: %v", err)
	}
	// Without a pull secret a full run stops with where to get one.
	if err := precheck(cfg, &flags{}, t.TempDir(), steps); err == nil || !strings.Contains(err.Error(), "pull secret") {
		t.Errorf("missing pull secret: %v", err)
	}
}
