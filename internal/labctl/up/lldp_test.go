package up_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// lldpReceive is a Port's Ethernet.LLDPReceive as vbmcd serves it.
type lldpReceive struct {
	ChassisID        string `json:"ChassisId"`
	ChassisIDSubtype string `json:"ChassisIdSubtype"`
	PortID           string `json:"PortId"`
	SystemName       string
	MgmtIPv4         string `json:"ManagementAddressIPv4"`
}

// TestLLDPOnTheWire: in a lab up to bmcs whose masters bond two NICs on
// the machine network (cluster.masters.bond), a node powered on through
// its BMC gets LLDP frames on each of its two NICs whose chassis, port and
// system name (and management address, which the baremetal bridge has none
// of) are that Port's LLDPReceive over Redfish: the two ports of the bond,
// each its own tap. The receiver
// is tcpdump on the NIC's tap in libvirtd's namespace (what qemu hands the
// guest's NIC), decoding the frames itself. `net check` reports the sender
// once it is killed, `net repair` starts it again, and after `down` no
// process of the lab is left.
func TestLLDPOnTheWire(t *testing.T) {
	tcpdump := testenv.Command(t, "tcpdump")
	port := testenv.Port(t, "127.0.0.1")
	_, _, common := tinyLab(t, "llldp", port, "10.198.61.=10.198.65.", "  sshKey: id.pub=  sshKey: id.pub\n  masters: {bond: active-backup}")
	labUp(t, "bmcs", common...)

	var st struct {
		Nodes []struct{ Name, BMC string }
	}
	if statusJSON(t, &st, common...); len(st.Nodes) == 0 {
		t.Fatal("status -o json: no nodes")
	}
	node := st.Nodes[0]
	sysURL := strings.TrimPrefix(node.BMC, "redfish-virtualmedia+")
	hc := labClient("labci", 10*time.Second, &tls.Config{InsecureSkipVerify: true})
	if code, body := redfishSend(t, hc, http.MethodPost, sysURL+"/Actions/ComputerSystem.Reset", "admin", "lab-pass", `{"ResetType":"On"}`); code >= 300 {
		t.Fatalf("power on %s: %d %s", node.Name, code, body)
	}
	t.Cleanup(func() { _ = exec.Command("virsh", "-c", "qemu:///system", "destroy", node.Name).Run() })

	// The NICs' ports as Redfish reports them once the node runs.
	chassis := strings.Replace(sysURL, "/Systems/", "/Chassis/", 1)
	var ports []lldpReceive
	if !testenv.WaitFor(time.Minute, func() bool {
		ports = nil
		var adapters struct {
			Members []struct {
				ID string `json:"@odata.id"`
			}
		}
		bmcGet(t, chassis+"/NetworkAdapters", &adapters)
		for _, a := range adapters.Members {
			var p struct {
				Ethernet struct{ LLDPReceive *lldpReceive }
			}
			bmcGet(t, sysURL[:strings.Index(sysURL, "/redfish/")]+a.ID+"/Ports/1", &p)
			if p.Ethernet.LLDPReceive != nil {
				ports = append(ports, *p.Ethernet.LLDPReceive)
			}
		}
		return len(ports) == 2
	}) {
		t.Fatalf("%s: ports with LLDPReceive after power on: %+v, want its two NICs'", node.Name, ports)
	}
	if ports[0].PortID == ports[1].PortID {
		t.Errorf("the bond's two ports report one tap: %+v", ports)
	}
	// What the wire carries to each NIC, decoded by tcpdump; both caught
	// at once (the sender sends at a node's start, then every 30 s).
	waits := map[string]func() string{}
	for _, w := range ports {
		waits[w.PortID] = captureLLDP(t, tcpdump, w.PortID)
	}
	for _, w := range ports {
		checkLLDPFrame(t, node.Name, w, waits[w.PortID]())
	}
	want := ports[0]

	// A sender that stopped is a difference; repair starts it again.
	pids := lldpSenders(t, "llldp")
	if len(pids) != 1 {
		t.Fatalf("LLDP senders of the lab: %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return len(lldpSenders(t, "llldp")) == 0 }) {
		t.Fatal("the LLDP sender does not stop on SIGTERM")
	}
	out, err := labctlRun(t, append([]string{"net", "check"}, common...)...)
	if err == nil || !strings.Contains(out, "LLDP sender") || !strings.Contains(out, "not running") {
		t.Errorf("net check with the sender stopped: %v\n%s", err, out)
	}
	// The restarted sender sends at once (then every 30 s).
	frame := captureLLDP(t, tcpdump, want.PortID)
	if out, err := labctlRun(t, append([]string{"net", "repair"}, common...)...); err != nil || !strings.Contains(out, "vbmcd lldp") {
		t.Errorf("net repair: %v\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "check"}, common...)...); err != nil {
		t.Errorf("net check after repair: %v\n%s", err, out)
	}
	if got := frame(); !strings.Contains(got, "Subtype Interface Name (5): "+want.PortID) {
		t.Errorf("after repair, the frame on %s:\n%s", want.PortID, got)
	}

	if out, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if left := leftovers(t, "llldp"); len(left) > 0 {
		t.Errorf("down left %v", left)
	}
}

// checkLLDPFrame checks the frame tcpdump decoded on a node's NIC against
// its port's LLDPReceive: the lab's baremetal bridge by name as the
// chassis and system, the NIC's tap as the port.
func checkLLDPFrame(t *testing.T, node string, want lldpReceive, got string) {
	t.Helper()
	t.Logf("%s: LLDPReceive %+v", node, want)
	// The node's NIC is on the baremetal bridge, a bridge-named libvirt
	// network: its name is the chassis.
	if want.ChassisIDSubtype != "IfName" || want.ChassisID != "baremetal" || want.SystemName != "baremetal" || !strings.HasPrefix(want.PortID, "vnet") {
		t.Errorf("LLDPReceive %+v: want the lab's baremetal bridge, by name, and the NIC's tap", want)
	}
	wants := []string{
		"Subtype Interface Name (5): " + want.PortID,
		"System Name TLV (5), length " + strconv.Itoa(len(want.SystemName)) + ": " + want.SystemName,
	}
	if want.ChassisIDSubtype == "MacAddr" {
		wants = append(wants, "Subtype MAC address (4): "+strings.ToLower(want.ChassisID))
	} else {
		wants = append(wants, "Subtype Interface name (6): "+want.ChassisID)
	}
	if want.MgmtIPv4 != "" {
		wants = append(wants, "Management Address length 5, AFI IPv4 (1): "+want.MgmtIPv4)
	} else if strings.Contains(got, "Management Address") {
		t.Errorf("the frame on %s has a management address; LLDPReceive has none:\n%s", want.PortID, got)
	}
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("the frame on %s lacks %q:\n%s", want.PortID, w, got)
		}
	}
}

// captureLLDP starts tcpdump on a tap in labci, returns once it listens,
// and gives a function that waits for its first LLDP frame and returns
// tcpdump's decoding of it, blanks made one space.
func captureLLDP(t *testing.T, tcpdump, tap string) func() string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", "labci", tcpdump, "-i", tap, "-c", "1", "-e", "-nn", "-vv", "-l",
		"ether", "proto", "0x88cc")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// tcpdump says "listening on <tap>" once its capture is open.
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.Contains(line, "listening on") {
		cancel()
		_ = cmd.Wait()
		t.Fatalf("tcpdump on %s: %q, %v", tap, line, err)
	}
	start := time.Now()
	return func() string {
		t.Helper()
		defer cancel()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("tcpdump on %s: %v\n%s", tap, err, out.String())
		}
		t.Logf("an LLDP frame on %s after %s:\n%s", tap, time.Since(start).Round(time.Millisecond), out.String())
		return regexp.MustCompile(`[ \t\n]+`).ReplaceAllString(out.String(), " ")
	}
}

// lldpSenders are the PIDs of the lab's `vbmcd lldp` processes.
func lldpSenders(t *testing.T, lab string) []int {
	t.Helper()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		args, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		a := strings.Split(string(args), "\x00")
		if slices.Contains(strings.Split(string(env), "\x00"), "BMLAB_LAB="+lab) && len(a) > 1 && a[1] == "lldp" && !strings.Contains(string(st), ") Z ") {
			pids = append(pids, pid)
		}
	}
	return pids
}
