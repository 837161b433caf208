package ironictest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// Ramdisk is the deploy ramdisk hack/build-ipa-ramdisk.sh builds from
// Debian 13's packages (ironic-python-agent 10.2.0, Linux 6.12) into the
// tool cache, linked at _out/tools/ipa-ramdisk: the real agent, which
// inspects, cleans and deploys a machine that boots it.
type Ramdisk struct {
	Kernel    string // vmlinuz
	Initramfs string // the whole root, a zstd cpio
	// ESP is a FAT EFI system partition whose GRUB reads the grub.cfg
	// Ironic writes on the UEFI ISOs it builds from Kernel and Initramfs
	// (Ironic's bootloader).
	ESP string
	// ISO holds Kernel and Initramfs and boots BIOS and UEFI on its own,
	// without Ironic's URL.
	ISO string
}

// RamdiskDir is where hack/build-ipa-ramdisk.sh links the ramdisk.
func RamdiskDir() string { return filepath.Join(testenv.RepoRoot(), "_out", "tools", "ipa-ramdisk") }

// DeployRamdisk returns the deploy ramdisk, or skips the test (fails it
// under CI=true) when it was not built.
func DeployRamdisk(t testing.TB) Ramdisk {
	t.Helper()
	d := RamdiskDir()
	r := Ramdisk{Kernel: filepath.Join(d, "vmlinuz"), Initramfs: filepath.Join(d, "initramfs"),
		ESP: filepath.Join(d, "esp.img"), ISO: filepath.Join(d, "ipa.iso")}
	for _, f := range []string{r.Kernel, r.Initramfs, r.ESP, r.ISO} {
		_, err := os.Stat(f)
		testenv.Require(t, err == nil, f+", the deploy ramdisk (bash hack/build-ipa-ramdisk.sh)")
	}
	return r
}

// ServeRamdisk puts the deploy ramdisk on Ironic's HTTP server and returns
// the driver_info that boots it: deploy_kernel and deploy_ramdisk (the
// ipxe boot interface loads them; redfish-virtual-media builds an ISO of
// them with the kernel command line Ironic sets, the agent's ipa-api-url
// on it) and bootloader (the ESP of that ISO under UEFI).
func (ir *Ironic) ServeRamdisk(r Ramdisk) map[string]any {
	return map[string]any{
		"deploy_kernel":  ir.Serve("/ipa/vmlinuz", r.Kernel),
		"deploy_ramdisk": ir.Serve("/ipa/initramfs", r.Initramfs),
		"bootloader":     ir.Serve("/ipa/esp.img", r.ESP),
	}
}

// AgentConfig is Ironic's configuration for nodes that boot the real
// agent: fast_track on or off, and the wait for the agent's own power-off
// at the end of a deploy as Ironic's defaults have it (up to 30 s; Start's
// 2 s suit the stand-in agent, which powers nothing off). Merge it into
// Options.Config.
func AgentConfig(fastTrack bool) map[string]map[string]string {
	return map[string]map[string]string{
		"deploy": {"fast_track": fmt.Sprint(fastTrack)},
		"agent":  {"post_deploy_get_power_state_retries": "6", "post_deploy_get_power_state_retry_interval": "5"},
	}
}

// AgentBootLine is the line the ramdisk's init prints on the console when
// it starts: counting it in a serial log counts the agent's boots.
const AgentBootLine = "bmlab-ipa: init "

// AgentStartLine is the line it prints when it starts the agent.
const AgentStartLine = "bmlab-ipa: starting ironic-python-agent"

// LogAgentTimes logs, for node name (active now), the time from its
// enrollment to active (Ironic's own created_at and provision_updated_at)
// and, for each boot of the deploy ramdisk, the time from the kernel's
// start to the agent's first heartbeat that Ironic took. inits are the
// times AgentBootLine showed on the node's console at serialLog (from
// testenv.WatchLines); the line says how long after the kernel started it
// ran, which puts each boot's kernel start on the host's clock.
func (ir *Ironic) LogAgentTimes(t testing.TB, name, serialLog string, inits []time.Time) {
	t.Helper()
	node, err := ir.Node(name)
	if err != nil {
		t.Fatal(err)
	}
	if node.ProvisionUpdatedAt != nil {
		t.Logf("%s: enroll to active %s (Ironic %s)", name, node.ProvisionUpdatedAt.Sub(node.CreatedAt).Round(time.Second), ir.Release)
	}
	b, _ := os.ReadFile(serialLog)
	uptimes := bootUptimes(string(b))
	beats := ir.Heartbeats(node.UUID)
	for i, seen := range inits {
		if i >= len(uptimes) {
			break
		}
		kernel := seen.Add(-uptimes[i])
		next := time.Now()
		if i+1 < len(inits) {
			next = inits[i+1]
		}
		if j := slices.IndexFunc(beats, func(b time.Time) bool { return b.After(kernel) && b.Before(next) }); j >= 0 {
			t.Logf("%s: the agent's boot %d: kernel to first heartbeat %s (Ironic %s)", name, i+1, beats[j].Sub(kernel).Round(100*time.Millisecond), ir.Release)
		}
	}
}

// bootUptimes returns, for each AgentBootLine in a serial log, the time
// after the kernel's start it says it was printed at.
func bootUptimes(log string) []time.Duration {
	var out []time.Duration
	for _, m := range bootLineRE.FindAllStringSubmatch(log, -1) {
		if s, err := strconv.ParseFloat(m[1], 64); err == nil {
			out = append(out, time.Duration(s*float64(time.Second)))
		}
	}
	return out
}

var bootLineRE = regexp.MustCompile(regexp.QuoteMeta(AgentBootLine) + `([0-9.]+) s after the kernel started`)
