package vbmcd

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestListenIPv6Loopback: vbmcd listens on an IPv6 address as labctl starts
// it for an IPv6 lab (--redfish-addr [ADDR]:PORT, --ipmi-addr ADDR; written
// in brackets too, [ADDR], as in a URL): Redfish answers on [::1] and
// ipmitool's lanplus session reaches the IPMI BMC on ::1.
func TestListenIPv6Loopback(t *testing.T) {
	ipmitool := testenv.Command(t, "ipmitool")
	c, err := net.ListenPacket("udp6", "[::1]:0")
	testenv.Require(t, err == nil, fmt.Sprintf("IPv6 on loopback (::1): %v", err))
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	for _, ipmiAddr := range []string{"::1", "[::1]"} {
		t.Run(ipmiAddr, func(t *testing.T) {
			addr, out := simDaemon(t, func(c *Config) {
				c.RedfishAddr, c.IPMI, c.IPMIAddr, c.IPMIPortBase, c.SimNodes = "[::1]:0", true, ipmiAddr, port, 1
			})
			if !strings.HasPrefix(addr, "[::1]:") {
				t.Fatalf("vbmcd serves Redfish at %s, not on [::1]:\n%s", addr, out)
			}
			r, err := send("GET", "http://"+addr+"/redfish/v1/Systems", "admin", "sim-pass-1", "")
			if err != nil {
				t.Fatal(err)
			}
			if r.Code != http.StatusOK || !strings.Contains(string(r.Body), `"Members@odata.count":1`) {
				t.Fatalf("GET Systems on [::1]: %d %s", r.Code, r.Body)
			}
			var got []byte
			if !testenv.WaitFor(10*time.Second, func() bool {
				got, err = exec.Command(ipmitool, "-I", "lanplus", "-H", "::1", "-p", strconv.Itoa(port),
					"-U", "admin", "-P", "sim-pass-1", "chassis", "power", "status").CombinedOutput()
				return err == nil
			}) {
				t.Fatalf("ipmitool on ::1 port %d: %v\n%s\nvbmcd:\n%s", port, err, got, out)
			}
			if !strings.Contains(string(got), "Chassis Power is") {
				t.Errorf("ipmitool chassis power status: %s", got)
			}
		})
	}
}
