package up_test

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/lab/ipimode"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestBMCNetworkReachesOnlyItsRoutes reproduces openshift/installer#10876
// on the real libvirtd (in labci): an IPI lab with a Managed provisioning
// network and a BMC network routed to the machine network alone (the
// default), up to install-config, with the bootstrap's provisioning
// services at bootstrapProvisioningIP serving the virtual media image there
// (an HTTP server in a namespace on the machine and provisioning networks,
// as the bootstrap VM is), and an insert into a node's virtual CD sent to
// its BMC from the machine network, as the installer's Ironic sends it:
//   - without a route from the BMC network to the provisioning network the
//     insert fails as the rack's does: the BMC answers 400
//     CouldNotEstablishConnection, saying there is no route to the image
//     server from its address; its CD keeps the failure (Status.Conditions)
//     and labctl status says it; the image server saw no request;
//   - with cluster.bmc.routes [machine, provisioning] (up again: one more
//     routing rule, vbmcd as it was) the same insert succeeds from the BMC's
//     address, and status says nothing;
//   - net check is clean after each up; down leaves no rule of the lab.
func TestBMCNetworkReachesOnlyItsRoutes(t *testing.T) {
	_, cfg, common := tinyLab(t, "lrf", 18768)
	lab := strings.NewReplacer(
		"10.198.61.", "10.198.68.",
		"cluster:\n", "network: {provisioningNetwork: Managed}\ncluster:\n  workers: {count: 0}\n",
		"  bmc: {", "  bmc: {network: 10.198.168.0/24, ",
	).Replace(readFile(t, cfg))
	write := func(lab string) {
		if err := os.WriteFile(cfg, []byte(lab), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(lab)
	up := func() {
		t.Helper()
		labUp(t, "install-config", common...)
		if out, err := labctlRun(t, append([]string{"net", "check"}, common...)...); err != nil {
			t.Errorf("net check after up = %v:\n%s", err, out)
		}
	}
	up()
	p := resolvePlan(t, cfg, ipimode.Name)
	n := p.Nodes[0]
	if got := p.BMC.Routes; len(got) != 1 || got[0] != "machine" {
		t.Fatalf("the BMC network's routes: %v, want [machine]", got)
	}

	// The bootstrap: on the machine network (eth0) and the provisioning
	// network (eth1, bootstrapProvisioningIP), where its HTTP server
	// serves the image the BMC is told to fetch.
	ns, _ := machineNetworkProbe(t, p)
	bootstrapOnProvisioning(t, ns, p)
	requests := make(chan string, 16)
	iso := testenv.MarkerISO(t)
	var ln net.Listener
	if err := netplumb.InNamespace(ns, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(p.Cluster.BootstrapProvisioningIP.String(), "6180"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests <- r.Method + " from " + r.RemoteAddr
		http.ServeFile(w, r, iso)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	image := "http://" + net.JoinHostPort(p.Cluster.BootstrapProvisioningIP.String(), "6180") + "/agent.iso"

	hc := labClient(ns, 90*time.Second, &tls.Config{RootCAs: labCA(t, p.Paths.CACert)})
	bmc := func(method, path, body string) (int, string) {
		t.Helper()
		code, b := redfishSend(t, hc, method, n.BMC.SystemURL+path, p.BMC.Username, p.BMC.Password, body)
		return code, string(b)
	}
	insert := func() (int, string) {
		return bmc(http.MethodPost, "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image":"`+image+`"}`)
	}

	// The probe's port on the NAT bridge forwards once the bridge has
	// learnt it: wait until the BMC answers from the machine network.
	if !testenv.WaitFor(20*time.Second, func() bool {
		_, err := systems(hc, "https://"+n.BMC.Addr.String()+"/redfish/v1/Systems", p.BMC.Username, p.BMC.Password)
		return err == nil
	}) {
		t.Fatalf("%s's BMC does not answer at %s from the machine network", n.Name, n.BMC.Addr)
	}

	// No route: the rack's failure.
	code, body := insert()
	want := "no route to the image server from the BMC's address " + n.BMC.Addr.String()
	if code != http.StatusBadRequest || !strings.Contains(body, "CouldNotEstablishConnection") || !strings.Contains(body, want) {
		t.Errorf("insert without a route: %d %s, want 400 CouldNotEstablishConnection saying %q", code, body, want)
	}
	select {
	case r := <-requests:
		t.Errorf("the image server was reached without a route: %s", r)
	default:
	}
	_, cd := bmc(http.MethodGet, "/VirtualMedia/Cd", "")
	var member struct {
		Inserted bool
		Status   struct{ Conditions []struct{ Message string } }
	}
	if err := json.Unmarshal([]byte(cd), &member); err != nil || member.Inserted || len(member.Status.Conditions) != 1 || !strings.Contains(member.Status.Conditions[0].Message, want) {
		t.Errorf("the CD after the failed insert: %v %s", err, cd)
	}
	out, err := labctlRun(t, append([]string{"status"}, common...)...)
	if err != nil || !strings.Contains(out, n.Name+": virtual media insert failed:") || !strings.Contains(out, want) {
		t.Errorf("status = %v, want %s's failed insert, %q:\n%s", err, n.Name, want, out)
	}

	// The route added, as a rack's network team would add it.
	write(strings.Replace(lab, "  bmc: {", "  bmc: {routes: [machine, provisioning], ", 1))
	up()
	rules, _ := exec.Command("ip", "-n", "labci", "rule").CombinedOutput()
	if !strings.Contains(string(rules), "from "+p.BMC.Network.String()+" to "+p.Cluster.ProvisioningNetworkCIDR.String()) {
		t.Errorf("no rule routes the BMC network to the provisioning network:\n%s", rules)
	}
	if code, body := insert(); code != http.StatusNoContent && code != http.StatusAccepted {
		t.Fatalf("insert with the route: %d %s", code, body)
	}
	var got string
	if !testenv.WaitFor(60*time.Second, func() bool {
		_, got = bmc(http.MethodGet, "/VirtualMedia/Cd", "")
		return strings.Contains(got, `"Inserted":true`) && !strings.Contains(got, `"State":"Starting"`)
	}) {
		t.Fatalf("the CD did not take the image: %s", got)
	}
	select {
	case r := <-requests:
		host, _, _ := net.SplitHostPort(strings.TrimPrefix(r, "GET from "))
		if a, err := netip.ParseAddr(host); err != nil || a != n.BMC.Addr {
			t.Errorf("the image server saw %s, want a GET from the BMC's address %s", r, n.BMC.Addr)
		}
	default:
		t.Error("the image server saw no request")
	}
	if out, err := labctlRun(t, append([]string{"status"}, common...)...); err != nil || strings.Contains(out, "insert failed") {
		t.Errorf("status after the insert = %v:\n%s", err, out)
	}

	if _, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
		t.Fatalf("down: %v", err)
	}
	if rules, _ := exec.Command("ip", "-n", "labci", "rule").CombinedOutput(); strings.Contains(string(rules), "proto 98") {
		t.Errorf("down left the lab's rules:\n%s", rules)
	}
}
