package bmcclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/lab/bmcclient"
	"github.com/bmlab/bmlab/internal/pki"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/vbmcd"
)

// labVbmcd runs vbmcd over two simulated servers with a certificate for
// 127.0.0.1 issued by a lab CA, as labctl runs it, and returns the plan
// labctl would have for them. With own addresses, each server has a BMC of
// its own there (as a lab's BMC network gives them), with a certificate
// the lab CA issued for it and the idrac10 personality, and the plan names
// each node's System as labctl's plan does there: the vendor's id.
func labVbmcd(t *testing.T, own ...string) *plan.Plan {
	t.Helper()
	dir := t.TempDir()
	p := &plan.Plan{Lab: "bc", StateDir: dir}
	p.Paths.CACert, p.Paths.CAKey = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	p.Paths.BMCCert, p.Paths.BMCKey = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	p.Vbmcd.Log = filepath.Join(dir, "vbmcd.log")
	ca, err := pki.EnsureCA(p.Paths.CACert, p.Paths.CAKey, "bmlab lab bc BMC CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.IssueServer(p.Paths.BMCCert, p.Paths.BMCKey, []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	port := testenv.Port(t, "127.0.0.1")
	p.BMC = plan.BMC{Scheme: "https", Host: "127.0.0.1", RedfishPort: port, Username: "admin", Password: "bc-pass-1", LabCA: true}
	var args []string
	ownPort := testenv.Port(t, "127.0.0.1")
	for i, a := range own {
		args = append(args, "--bmc-addresses", fmt.Sprintf("sim-%04d=%s", i+1, a))
	}
	if len(own) > 0 {
		args = append(args, "--bmc-redfish-port", strconv.Itoa(ownPort), "--bmc-ipmi-port", "0",
			"--tls-ca-cert", p.Paths.CACert, "--tls-ca-key", p.Paths.CAKey, "--personality", "idrac10")
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- vbmcd.Run(ctx, vbmcd.Streams{Out: out, ErrOut: out}, append(args,
			"--backend", "sim", "--sim-nodes", "2", "--ipmi=false",
			"--redfish-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			"--username", "admin", "--password", "bc-pass-1",
			"--tls-cert", p.Paths.BMCCert, "--tls-key", p.Paths.BMCKey,
			"--state-dir", filepath.Join(dir, "vbmcd"), "--media-dir", filepath.Join(dir, "media"),
			"--media-allow-loopback",
			// The second node accepts a power-on and stays off, so its
			// boot override stays to be read.
			`--fault={"machine":"sim-0002","refusePowerOn":true}`,
		))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("vbmcd: %v\n%s", err, out)
		}
	})
	for _, name := range []string{"sim-0001", "sim-0002"} {
		id := sim.UUIDFor(name)
		n := plan.Node{Name: name, UUID: id}
		n.BMC.SystemURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/redfish/v1/Systems/" + id
		if len(own) > 0 {
			n.BMC.SystemURL = "https://" + net.JoinHostPort(own[len(p.Nodes)], strconv.Itoa(ownPort)) + "/redfish/v1/Systems/System.Embedded.1"
		}
		p.Nodes = append(p.Nodes, n)
	}
	if err := bmcclient.WaitAnswer(context.Background(), p, 20*time.Second, nil); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return p
}

// TestAgainstVbmcd: labctl's BMC client (gofish) against vbmcd as labctl
// runs it: WaitAnswer finds every node's System, verifying vbmcd's
// certificate against the lab's CA, and refuses a certificate another CA
// issued; BootFromISO has the BMC fetch the ISO, sets the Once override to
// the CD (read back on a node that refuses to power on, so the override is
// not consumed) and powers the system on; called again while the system
// still powers on, it waits and restarts it; Eject empties the drive. What the client did is read back with gofish
// directly.
func TestAgainstVbmcd(t *testing.T) {
	p := labVbmcd(t)
	ctx := context.Background()

	// Another CA: the same vbmcd is refused.
	other := *p
	other.Paths.CACert, other.Paths.CAKey = filepath.Join(t.TempDir(), "ca.crt"), filepath.Join(t.TempDir(), "ca.key")
	if _, err := pki.EnsureCA(other.Paths.CACert, other.Paths.CAKey, "another CA", time.Now()); err != nil {
		t.Fatal(err)
	}
	err := bmcclient.WaitAnswer(ctx, &other, time.Second, nil)
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("WaitAnswer with another CA = %v, want the certificate refused", err)
	}
	// No CA file: a clear error, not an unverified connection.
	other.Paths.CACert = filepath.Join(t.TempDir(), "missing.crt")
	if _, err := bmcclient.New(&other); err == nil || !strings.Contains(err.Error(), "the lab's CA") {
		t.Errorf("New without the CA file = %v, want the lab's CA named", err)
	}

	image := serveISO(t)

	c, err := bmcclient.New(p)
	if err != nil {
		t.Fatal(err)
	}
	n := p.Nodes[0]
	if sent, err := c.BootFromISO(ctx, n.BMC.SystemURL, image); err != nil || !sent {
		t.Fatalf("BootFromISO = %v, %v", sent, err)
	}
	sys, cd := read(t, p, n.UUID)
	if sys.PowerState != schemas.OnPowerState && sys.PowerState != schemas.PoweringOnPowerState {
		t.Errorf("after BootFromISO: power %s, want on", sys.PowerState)
	}
	if cd.Inserted == nil || !*cd.Inserted || cd.Image != image {
		t.Errorf("after BootFromISO the CD holds %q (inserted %v), want %s", cd.Image, cd.Inserted, image)
	}
	// The second node refuses to power on (a fault): the override it was
	// given stays, and reads Cd Once.
	if _, err := c.BootFromISO(ctx, p.Nodes[1].BMC.SystemURL, image); err != nil {
		t.Fatalf("BootFromISO of the second node: %v", err)
	}
	if sys, _ := read(t, p, p.Nodes[1].UUID); sys.Boot.BootSourceOverrideTarget != schemas.CdBootSource ||
		sys.Boot.BootSourceOverrideEnabled != schemas.OnceBootSourceOverrideEnabled || sys.Boot.BootSourceOverrideMode != schemas.UEFIBootSourceOverrideMode {
		t.Errorf("the second node's override: %s %s %s; want Cd Once UEFI", sys.Boot.BootSourceOverrideTarget, sys.Boot.BootSourceOverrideEnabled, sys.Boot.BootSourceOverrideMode)
	}
	// Again, at once: the image is there, the system still powers on:
	// the client waits until it runs, and restarts it (a reset while it
	// powers on is refused with 409).
	if _, err := c.BootFromISO(ctx, n.BMC.SystemURL, image); err != nil {
		t.Fatalf("BootFromISO again: %v", err)
	}
	if sys, _ := read(t, p, n.UUID); sys.PowerState == schemas.OffPowerState {
		t.Errorf("after a second BootFromISO the system is off")
	}
	if err := c.Eject(ctx, n.BMC.SystemURL); err != nil {
		t.Fatalf("Eject: %v", err)
	}
	if _, cd := read(t, p, n.UUID); cd.Inserted != nil && *cd.Inserted {
		t.Errorf("after Eject the CD holds %q", cd.Image)
	}
	if err := c.Eject(ctx, n.BMC.SystemURL); err != nil {
		t.Errorf("Eject of an empty drive: %v", err)
	}

	// A BMC's refusal says what was asked and what the BMC answered.
	if _, err := c.BootFromISO(ctx, n.BMC.SystemURL, "ftp://127.0.0.1/agent.iso"); err == nil || !strings.Contains(err.Error(), "InsertMedia: 400") {
		t.Errorf("BootFromISO of an ftp:// image = %v, want the BMC's 400", err)
	}
}

// TestAgainstVendorBMC: labctl's BMC client at BMCs of their own of a
// vendor personality, by the System URL labctl's plan gives them there
// (the vendor's id, /redfish/v1/Systems/System.Embedded.1 on every iDRAC,
// as install-config names it): WaitAnswer finds each node's own System
// there (its UUID), with the certificate the lab's CA issued for the BMC's
// address; BootFromISO inserts the ISO, sets the override and powers the
// node on; Eject empties the drive; read back by UUID on the shared
// listener.
func TestAgainstVendorBMC(t *testing.T) {
	p := labVbmcd(t, "127.36.36.1", "127.36.36.2")
	ctx := context.Background()
	image := serveISO(t)
	c, err := bmcclient.New(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range p.Nodes {
		if sent, err := c.BootFromISO(ctx, n.BMC.SystemURL, image); err != nil || !sent {
			t.Fatalf("%s: BootFromISO at %s = %v, %v", n.Name, n.BMC.SystemURL, sent, err)
		}
		sys, cd := read(t, p, n.UUID)
		if cd.Inserted == nil || !*cd.Inserted || cd.Image != image {
			t.Errorf("%s: after BootFromISO at %s the CD holds %q (inserted %v)", n.Name, n.BMC.SystemURL, cd.Image, cd.Inserted)
		}
		// The first powers on (its boot takes the Once override); the
		// second refuses to (a fault), so its override stays to be read.
		if on := sys.PowerState == schemas.OnPowerState || sys.PowerState == schemas.PoweringOnPowerState; i == 0 && !on {
			t.Errorf("%s: after BootFromISO at %s: power %s, want on", n.Name, n.BMC.SystemURL, sys.PowerState)
		}
		if i == 1 && (sys.Boot.BootSourceOverrideTarget != schemas.CdBootSource || sys.Boot.BootSourceOverrideEnabled != schemas.OnceBootSourceOverrideEnabled) {
			t.Errorf("%s: after BootFromISO at %s: override %s %s, want Cd Once", n.Name, n.BMC.SystemURL, sys.Boot.BootSourceOverrideTarget, sys.Boot.BootSourceOverrideEnabled)
		}
		if err := c.Eject(ctx, n.BMC.SystemURL); err != nil {
			t.Fatalf("%s: Eject at %s: %v", n.Name, n.BMC.SystemURL, err)
		}
		if _, cd := read(t, p, n.UUID); cd.Inserted != nil && *cd.Inserted {
			t.Errorf("%s: after Eject the CD holds %q", n.Name, cd.Image)
		}
	}
}

// read is the system with id and its CD, as gofish reads them.
func read(t *testing.T, p *plan.Plan, id string) (*schemas.ComputerSystem, *schemas.VirtualMedia) {
	t.Helper()
	hc, err := bmcclient.HTTP(p)
	if err != nil {
		t.Fatal(err)
	}
	api, err := gofish.Connect(gofish.ClientConfig{Endpoint: "https://" + net.JoinHostPort(p.BMC.Host, strconv.Itoa(p.BMC.RedfishPort)),
		Username: p.BMC.Username, Password: p.BMC.Password, BasicAuth: true, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := schemas.GetComputerSystem(api, "/redfish/v1/Systems/"+id)
	if err != nil {
		t.Fatal(err)
	}
	vms, err := sys.VirtualMedia()
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms {
		for _, mt := range vm.MediaTypes {
			if mt == schemas.CDVirtualMediaType {
				return sys, vm
			}
		}
	}
	t.Fatalf("system %s has no CD", id)
	return nil, nil
}

// serveISO serves a 64 KiB image with an ISO 9660 signature over HTTP and
// returns its URL.
func serveISO(t *testing.T) string {
	t.Helper()
	iso := make([]byte, 64<<10)
	copy(iso[32769:], "CD001")
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "agent.iso", time.Now(), strings.NewReader(string(iso)))
	}))
	t.Cleanup(images.Close)
	return images.URL + "/agent.iso"
}
