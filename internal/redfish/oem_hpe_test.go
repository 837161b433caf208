package redfish

import (
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestRIBCLProliantutils: Debian 13's proliantutils 2.16.3 (Ironic 29's
// ilo hardware types' library, from its trixie root) drives an iLO 6 at a
// BMC of its own as Ironic's ilo drivers call it
// (testdata/proliantutils_ribcl.py): IloClient reads the Gen11's product
// name over RIBCL and keeps to RIBCL; power (on, hold, reset), the boot
// modes, the one-time and the persistent boot, virtual media CDROM and
// FLOPPY, the inspection's essential properties and capabilities; secure
// boot, which RIBCL lacks, and a wrong password are refused as iLO
// refuses them; each change shows over Redfish as well.
func TestRIBCLProliantutils(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python29(t, "proliantutils.ilo.client")
	script := py.Script(t, "testdata/proliantutils_ribcl.py")
	f, views := personalityFixture(t, allQuirksOff)
	ilo := views[3]
	if ilo.Personality != "ilo6" {
		t.Fatalf("views[3] is %s", ilo.Personality)
	}
	ts := listenAtBMC(t, f.h, ilo.UUID)
	ca := writeServerCA(t, filepath.Join(py.Dir(), "ca.pem"), ts)
	u, _ := url.Parse(ts.URL)
	cmd := py.Command(script, u.Hostname(), u.Port(), ca, testUser, testPass, f.images.URL+"/small.iso")
	cmd.Env = append(cmd.Env, "REQUESTS_CA_BUNDLE="+ca, "PYTHONUNBUFFERED=1")
	cmd.WaitDelay = time.Second
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	runToDone(t, "proliantutils", cmd)
}

// TestRIBCLRefusals: what RIBCL refuses, with iLO's status and message in
// the last RESPONSE, and where /ribcl is not served.
func TestRIBCLRefusals(t *testing.T) {
	f, views := personalityFixture(t, allQuirksOff)
	ilo, dell := views[3].UUID, views[1].UUID
	doc := func(login, block string) string {
		return `<RIBCL VERSION="2.0"><LOGIN ` + login + `>` + block + `</LOGIN></RIBCL>`
	}
	good := `USER_LOGIN="` + testUser + `" PASSWORD="` + testPass + `"`
	for _, tc := range []struct{ name, body, status, message string }{
		{"not XML", "hello", "0x0001", "Syntax error"},
		{"not RIBCL", `<FOO/>`, "0x0001", "Syntax error"},
		{"no login", `<RIBCL VERSION="2.0"><SERVER_INFO MODE="read"/></RIBCL>`, "0x0001", "LOGIN expected"},
		{"a wrong password", doc(`USER_LOGIN="`+testUser+`" PASSWORD="nope"`, `<SERVER_INFO MODE="read"><GET_PRODUCT_NAME/></SERVER_INFO>`), "0x005F", "Login failed."},
		{"an unknown command", doc(good, `<SERVER_INFO MODE="read"><GET_NOTHING/></SERVER_INFO>`), "0x003C", "Feature not supported - GET_NOTHING"},
		{"a change in a read block", doc(good, `<SERVER_INFO MODE="read"><SET_HOST_POWER HOST_POWER="Yes"/></SERVER_INFO>`), "0x0001", `needs MODE="write"`},
		{"a bad power value", doc(good, `<SERVER_INFO MODE="write"><SET_HOST_POWER HOST_POWER="Maybe"/></SERVER_INFO>`), "0x0004", "Yes or No"},
		{"an unknown device", doc(good, `<RIB_INFO MODE="read"><GET_VM_STATUS DEVICE="TAPE"/></RIB_INFO>`), "0x0035", "invalid Virtual Media option"},
		{"an eject of nothing", doc(good, `<RIB_INFO MODE="write"><EJECT_VIRTUAL_MEDIA DEVICE="CDROM"/></RIB_INFO>`), "0x0039", "No image present"},
		{"an unknown boot device", doc(good, `<SERVER_INFO MODE="write"><SET_PERSISTENT_BOOT><DEVICE VALUE="Boot0FFF"/></SET_PERSISTENT_BOOT></SERVER_INFO>`), "0x0004", "not one of this server's"},
		{"a one-time boot of nothing", doc(good, `<SERVER_INFO MODE="write"><SET_ONE_TIME_BOOT value="TAPE"/></SERVER_INFO>`), "0x0004", "not a one-time boot device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(req{method: http.MethodPost, path: "/ribcl", body: tc.body, bmc: ilo, noAuth: true, ctype: "-"})
			wantCode(t, w, http.StatusOK, tc.name)
			body := w.Body.String()
			last := html.UnescapeString(body[strings.LastIndex(body, "<RESPONSE"):])
			if !strings.Contains(last, `STATUS="`+tc.status+`"`) || !strings.Contains(last, tc.message) {
				t.Errorf("last RESPONSE %s, want status %s saying %q", last, tc.status, tc.message)
			}
		})
	}
	if m, _ := f.svc.Get(ilo); m.Power != machine.PowerOff {
		t.Errorf("a refused request changed the power: %s", m.Power)
	}
	get := `<RIBCL VERSION="2.0"><LOGIN ` + good + `><SERVER_INFO MODE="read"><GET_PRODUCT_NAME/></SERVER_INFO></LOGIN></RIBCL>`
	wantCode(t, f.do(req{method: http.MethodPost, path: "/ribcl", body: get, bmc: dell, noAuth: true, ctype: "-"}), http.StatusNotFound, "RIBCL at an iDRAC")
	wantCode(t, f.do(req{method: http.MethodPost, path: "/ribcl", body: get, noAuth: true, ctype: "-"}), http.StatusNotFound, "RIBCL at the shared listener")
	wantCode(t, f.do(req{path: "/ribcl", bmc: ilo}), http.StatusMethodNotAllowed, "GET /ribcl")
	// A body is read as every body is: at most maxBody.
	big := doc(good, strings.Repeat("<!-- padding -->", maxBody/16+1))
	if w := f.do(req{method: http.MethodPost, path: "/ribcl", body: big, bmc: ilo, noAuth: true, ctype: "-"}); w.Code != http.StatusRequestEntityTooLarge || messageIDs(t, w)[0] != "PayloadTooLarge" {
		t.Errorf("RIBCL over %d bytes: %d %.200s", maxBody, w.Code, w.Body.String())
	}
}
