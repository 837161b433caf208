package vbmcd

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2EOneBMCPerAddress: over libvirt, each domain's own BMC address is
// recorded in its metadata (<bmc-address>), so a restarted vbmcd gives
// every domain the address it had, and a domain defined meanwhile takes the
// next free one even though its name sorts first. At its address, curl
// finds the domain alone and ipmitool (port 623) boots it.
func TestE2EOneBMCPerAddress(t *testing.T) {
	lab := virttest.New(t, "e2e-bmcaddr-")
	b := lab.NewVM(t, "b", virttest.VMOptions{NoCD: true, DiskMarker: true})
	c := lab.NewVM(t, "c", virttest.VMOptions{NoCD: true})
	state := t.TempDir()
	run := func(t *testing.T) {
		daemon(t, "e2e-bmcaddr-", func(cfg *Config) {
			cfg.IPMI, cfg.StateDir, cfg.BMCIPMIPort = true, state, 623
			cfg.BMCAddresses = []string{"127.34.1.1-127.34.1.3"}
		})
	}
	recorded := func(name string) string {
		t.Helper()
		m := regexp.MustCompile(`<bmc-address>([^<]+)</bmc-address>`).FindStringSubmatch(lab.LiveXML(t, name, libvirt.DomainXMLInactive))
		if m == nil {
			t.Fatalf("%s: no <bmc-address> in its metadata", name)
		}
		return m[1]
	}
	ca := filepath.Join(state, bmcCACert)
	t.Run("first", func(t *testing.T) {
		run(t)
		if got := []string{recorded(b.Name), recorded(c.Name)}; got[0] != "127.34.1.1" || got[1] != "127.34.1.2" {
			t.Errorf("addresses of b and c: %v, want 127.34.1.1 and 127.34.1.2", got)
		}
	})
	a := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true})
	t.Run("restarted", func(t *testing.T) {
		run(t)
		want := map[string]string{b.ID: "127.34.1.1", c.ID: "127.34.1.2", a.ID: "127.34.1.3"}
		for _, vm := range []*virttest.VM{a, b, c} {
			if got := recorded(vm.Name); got != want[vm.ID] {
				t.Errorf("%s after a restart: %s, want %s", vm.Name, got, want[vm.ID])
			}
			if got := curlSystems(t, "", want[vm.ID], ca, "e2e-pass"); len(got) != 1 || got[0] != vm.ID {
				t.Errorf("https://%s/redfish/v1/Systems: %v, want [%s]", want[vm.ID], got, vm.ID)
			}
		}
		ipmiPower(t, "", "127.34.1.1", "e2e-pass", "on")
		b.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
		if s := lab.DomainState(t, c.Name); s != libvirt.DomainShutoff {
			t.Errorf("the neighbour %s runs (state %d)", c.Name, s)
		}
	})
}
