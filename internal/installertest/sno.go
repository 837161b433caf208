package installertest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/util"
	types "github.com/coreos/ignition/v2/config/v3_2/types"
)

// The single-node flow (bootstrap in place).
const (
	// BootstrapInPlaceIgn is what `create single-node-ignition-config`
	// writes for the live ISO.
	BootstrapInPlaceIgn = "bootstrap-in-place-for-live-iso.ign"
	// InstallToDiskScript is the file of that config that installs the
	// node onto bootstrapInPlace.installationDisk once bootkube is done.
	InstallToDiskScript = "/usr/local/bin/install-to-disk.sh"
	// LiveISOMarker starts the line the fixture's live ISO prints on the
	// serial console: "BMLAB-LIVE-ISO ignition=embedded" when the ISO
	// carries /images/ignition.img, "ignition=none" when not.
	LiveISOMarker = "BMLAB-LIVE-ISO"
	// EnvLiveNodes, a JSON list of AgentNode, makes `wait-for
	// install-complete` after `create single-node-ignition-config` play
	// the bootstrap in place on the lab's real domain: it waits until the
	// node booted the live ISO with an embedded ignition and powered off,
	// checks that the ISO in its CD drive embeds the config it wrote,
	// writes the installed OS (Image) onto the disk the guest sees as
	// bootstrapInPlace.installationDisk, and starts the node.
	EnvLiveNodes = "FAKE_INSTALLER_LIVE_NODES"
)

// LiveISO writes a stand-in for the RHCOS live ISO at path: a grub image
// (x86_64 UEFI) that prints LiveISOMarker with whether it carries an
// embedded ignition, and powers off.
func LiveISO(t testing.TB, path string) {
	t.Helper()
	cfg := "echo \"\"\n" +
		"if [ -f /images/ignition.img ]; then echo \"" + LiveISOMarker + " ignition=embedded\"; else echo \"" + LiveISOMarker + " ignition=none\"; fi\nhalt\n"
	if err := buildISO(path, cfg, "x86_64"); err != nil {
		t.Fatal(err)
	}
}

// createSingleNode is `create single-node-ignition-config`: it refuses an
// install-config the real installer refuses for it (one control-plane
// replica, an installation disk), consumes the manifests when there are
// any, and writes bootstrap-in-place-for-live-iso.ign (the bootstrap's
// config with the install-to-disk service), worker.ign, auth/ and
// metadata.json.
func (r *run) createSingleNode() int {
	ic, ok := r.installConfig()
	if !ok {
		return ExitInstallConfigError
	}
	var bad []string
	if ic.Masters() != 1 {
		bad = append(bad, fmt.Sprintf("controlPlane.replicas: Invalid value: %d: bootstrap in place requires a single ControlPlane replica", ic.Masters()))
	}
	if ic.BootstrapInPlace == nil || ic.BootstrapInPlace.InstallationDisk == "" {
		bad = append(bad, "bootstrapInPlace.installationDisk: Required value: installationDisk must be set the target disk drive for the installation")
	}
	if len(bad) > 0 {
		r.log("fatal", "failed to fetch Single Node Bootstrap In Place Ignition Config: failed to load asset \"Install Config\": invalid install-config configuration: "+strings.Join(bad, ", "))
		return ExitInstallConfigError
	}
	files, err := r.ignitionConfigs(ic)
	if err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	delete(files, MasterIgn)
	boot := files[BootstrapIgn]
	delete(files, BootstrapIgn)
	bip, err := bootstrapInPlace(boot, ic.BootstrapInPlace.InstallationDisk)
	if err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	files[BootstrapInPlaceIgn] = bip
	if err := writeAll(r.dir, files); err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	r.log("info", "Single-Node-Ignition-Config created in: "+r.dir+" and "+filepath.Join(r.dir, "auth"))
	return 0
}

// bootstrapInPlace adds to the bootstrap's config what makes it the
// node's own: the script and unit that write the OS to the installation
// disk with the master's config once bootkube is done.
func bootstrapInPlace(boot []byte, disk string) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(boot, &cfg); err != nil {
		return nil, err
	}
	script := "#!/usr/bin/env bash\nset -euoE pipefail\n# bootstrap in place: the master's config onto the installation disk\n" +
		"coreos-installer install --ignition-file /opt/openshift/master.ign " + disk + "\nreboot\n"
	f := types.File{
		Node:          types.Node{Path: InstallToDiskScript, Overwrite: util.BoolToPtr(true), User: types.NodeUser{Name: util.StrToPtr("root")}},
		FileEmbedded1: types.FileEmbedded1{Mode: util.IntToPtr(0o555), Contents: types.Resource{Source: util.StrToPtr(dataURL([]byte(script)))}},
	}
	u := types.Unit{Name: "install-to-disk.service", Enabled: util.BoolToPtr(true),
		Contents: util.StrToPtr("[Unit]\nDescription=Install to disk\nRequires=bootkube.service\nAfter=bootkube.service\n[Service]\nType=oneshot\nExecStart=" + InstallToDiskScript + "\n[Install]\nWantedBy=multi-user.target\n")}
	storage, _ := cfg["storage"].(map[string]any)
	systemd, _ := cfg["systemd"].(map[string]any)
	if storage == nil || systemd == nil {
		return nil, fmt.Errorf("the bootstrap config has no storage or systemd section")
	}
	storage["files"] = append(storage["files"].([]any), f)
	systemd["units"] = append(systemd["units"].([]any), u)
	return json.Marshal(cfg)
}

// playLive does, for EnvLiveNodes, what the live ISO does on the single
// node: once it booted with an embedded ignition that is the installer's
// (its install-to-disk script naming the installation disk) and powered
// off, write the installed OS on that disk and boot it.
func (r *run) playLive(ic InstallConfig) error {
	nodes, timeout, err := agentNodes(EnvLiveNodes)
	if err != nil || nodes == nil {
		return err
	}
	if ic.BootstrapInPlace == nil {
		return fmt.Errorf("%s set but the install-config has no bootstrapInPlace", EnvLiveNodes)
	}
	disk := ic.BootstrapInPlace.InstallationDisk
	for _, n := range nodes {
		done := filepath.Join(r.dir, ".fake-live-installed-"+n.Domain)
		if _, err := os.Stat(done); err == nil {
			continue
		}
		deadline := time.Now().Add(timeout)
		for {
			log, _ := os.ReadFile(n.Serial)
			st, _ := exec.Command("virsh", "-c", "qemu:///system", "domstate", n.Domain).Output()
			if strings.Contains(string(log), LiveISOMarker+" ignition=embedded") && strings.TrimSpace(string(st)) == "shut off" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s did not boot the live ISO with an embedded ignition and power off within %s (state %q)", n.Domain, timeout, strings.TrimSpace(string(st)))
			}
			time.Sleep(250 * time.Millisecond)
		}
		blk, err := exec.Command("virsh", "-c", "qemu:///system", "domblklist", "--details", n.Domain).Output()
		if err != nil {
			return fmt.Errorf("virsh domblklist %s: %w", n.Domain, err)
		}
		var iso, target string
		for _, l := range strings.Split(string(blk), "\n") {
			f := strings.Fields(l)
			if len(f) == 4 && f[1] == "cdrom" {
				iso = f[3]
			}
			if len(f) == 4 && f[1] == "disk" && "/dev/"+f[2] == disk {
				target = f[3]
			}
		}
		if err := checkEmbedded(iso, disk); err != nil {
			return fmt.Errorf("node %s: %w", n.Domain, err)
		}
		if target == "" {
			return fmt.Errorf("node %s has no disk %s (bootstrapInPlace.installationDisk):\n%s", n.Domain, disk, blk)
		}
		r.log("info", "Host "+n.Domain+": bootkube done, writing the installed OS to "+disk)
		if b, err := exec.Command("qemu-img", "convert", "-n", "-f", "raw", "-O", "qcow2", n.Image, target).CombinedOutput(); err != nil {
			return fmt.Errorf("write the installed OS to %s: %v: %s", target, err, b)
		}
		r.log("info", "Host "+n.Domain+": Rebooting into "+disk)
		if b, err := exec.Command("virsh", "-c", "qemu:///system", "start", n.Domain).CombinedOutput(); err != nil {
			return fmt.Errorf("start %s: %v: %s", n.Domain, err, b)
		}
		if err := os.WriteFile(done, nil, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// checkEmbedded checks that iso carries, as /images/ignition.img (a gzip
// cpio), a config with the install-to-disk script for disk: the one this
// fixture wrote, as the live system would run it.
func checkEmbedded(iso, disk string) error {
	if iso == "" || iso == "-" {
		return fmt.Errorf("no ISO in the CD drive")
	}
	tmp, err := os.MkdirTemp("", "fake-live-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	img := filepath.Join(tmp, "ignition.img")
	out, _ := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/images/ignition.img", img).CombinedOutput()
	raw, err := os.ReadFile(img)
	if err != nil {
		return fmt.Errorf("%s has no /images/ignition.img: %s", path.Base(iso), out)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s: /images/ignition.img: %w", path.Base(iso), err)
	}
	cpio, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("%s: /images/ignition.img: %w", path.Base(iso), err)
	}
	want := "coreos-installer install --ignition-file /opt/openshift/master.ign " + disk
	if !bytes.Contains(cpio, []byte("config.ign\x00")) || !bytes.Contains(cpio, []byte(dataURL([]byte("#!/usr/bin/env bash\nset -euoE pipefail\n# bootstrap in place: the master's config onto the installation disk\n"+want+"\nreboot\n")))) {
		return fmt.Errorf("%s: /images/ignition.img holds no config.ign with the bootstrap-in-place install to %s", path.Base(iso), disk)
	}
	return nil
}
