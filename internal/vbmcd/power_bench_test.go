package vbmcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// BenchmarkPowerActionAnswered: how long a real BMC-like answer to a power
// action takes on real libvirt + qemu. Each iteration powers one VM on and
// off again, once over Redfish (Reset On / ForceOff) and once over IPMI
// (chassis control, a session each), waits until libvirt itself shows the
// change, and times only the answers. Reported: p50 and p99 of the answers
// per face, in ms.
func BenchmarkPowerActionAnswered(b *testing.B) {
	lab := virttest.New(b, "bench-pwr-")
	vm := lab.NewVM(b, "a", virttest.VMOptions{NoCD: true}) // sits in its firmware while on
	port := freeUDPPort(b)
	if out, err := runCLI(b, "ipmi", "set", vm.Name, "--address", "127.0.0.1", "--port", strconv.Itoa(port), "--domains", "bench-pwr-*"); err != nil {
		b.Fatalf("vbmcd ipmi set: %v\n%s", err, out)
	}
	url := daemon(b, "bench-pwr-", func(c *Config) { c.IPMI = true })
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	redfish := func(rt string) time.Duration {
		r, _ := http.NewRequest(http.MethodPost, url+"/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", strings.NewReader(`{"ResetType":"`+rt+`"}`))
		r.SetBasicAuth("admin", "e2e-pass")
		r.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := hc.Do(r)
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			b.Fatalf("Reset %s: %v %v", rt, resp, err)
		}
		resp.Body.Close()
		return took
	}
	ipmi := func(on bool) time.Duration {
		c, err := client.Dial(context.Background(), "127.0.0.1:"+strconv.Itoa(port), client.Config{Username: "admin", Password: "e2e-pass", Timeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		arg := byte(0) // power down
		if on {
			arg = 1
		}
		start := time.Now()
		code, _, err := c.Do(wire.NetFnChassis, 0x02, arg)
		took := time.Since(start)
		if err != nil || code != wire.CodeOK {
			b.Fatalf("chassis control %d: %v %v", arg, code, err)
		}
		return took
	}
	// wait returns once libvirt shows the state and vbmcd reads it too, so
	// the next action is not refused as one still under way.
	wait := func(want libvirt.DomainState) {
		power := map[libvirt.DomainState]string{libvirt.DomainRunning: "On", libvirt.DomainShutoff: "Off"}[want]
		if !testenv.WaitFor(30*time.Second, func() bool {
			if lab.DomainState(b, vm.Name) != want {
				return false
			}
			r, _ := http.NewRequest(http.MethodGet, url+"/redfish/v1/Systems/"+vm.ID, nil)
			r.SetBasicAuth("admin", "e2e-pass")
			resp, err := hc.Do(r)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var v struct{ PowerState string }
			json.NewDecoder(resp.Body).Decode(&v)
			return v.PowerState == power
		}) {
			b.Fatalf("libvirt and vbmcd never both showed %s", power)
		}
	}
	var rf, ip []time.Duration
	for b.Loop() {
		rf = append(rf, redfish("On"))
		wait(libvirt.DomainRunning)
		rf = append(rf, redfish("ForceOff"))
		wait(libvirt.DomainShutoff)
		ip = append(ip, ipmi(true))
		wait(libvirt.DomainRunning)
		ip = append(ip, ipmi(false))
		wait(libvirt.DomainShutoff)
	}
	for _, f := range []struct {
		name string
		l    []time.Duration
	}{{"redfish", rf}, {"ipmi", ip}} {
		slices.Sort(f.l)
		b.ReportMetric(ms(f.l[len(f.l)/2]), f.name+"-p50-ms")
		b.ReportMetric(ms(f.l[(len(f.l)*99)/100]), f.name+"-p99-ms")
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
