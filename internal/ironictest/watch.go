package ironictest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Redfish is a BMC service the agent may read: its root URL
// (https://ADDR[:PORT]), credentials, and the CA that verifies it (a PEM
// file; "" trusts the host's roots).
type Redfish struct {
	URL, User, Password, CAFile string
}

func (r Redfish) client() (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no certificate", r.CAFile)
		}
		tc.RootCAs = pool
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

func (r Redfish) do(hc *http.Client, method, path string, body any, out any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(r.URL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(r.User, r.Password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return resp, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return resp, json.Unmarshal(b, out)
	}
	return resp, nil
}

// WatchEvents tells the agent of every boot of the deploy image on the
// systems a Redfish service serves (a simulated machine has no console to
// read): it subscribes to the service's events, and each "one-time boot
// override (Cd) was used" event of a system is a boot of the virtual CD,
// which Ironic's redfish-virtual-media boot sets up. The system's MACs come
// from its EthernetInterfaces. The event listener is on 127.0.0.1, so vbmcd
// must allow event destinations on loopback (--events-allow-loopback). The
// subscription ends with the test.
func (a *Agent) WatchEvents(svc Redfish) error {
	hc, err := svc.client()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var macsMu sync.Mutex
	macs := map[string][]string{}
	macsOf := func(system string) ([]string, error) {
		macsMu.Lock()
		defer macsMu.Unlock()
		if m := macs[system]; m != nil {
			return m, nil
		}
		var coll struct {
			Members []struct {
				ID string `json:"@odata.id"`
			}
		}
		if _, err := svc.do(hc, http.MethodGet, system+"/EthernetInterfaces", nil, &coll); err != nil {
			return nil, err
		}
		var out []string
		for _, m := range coll.Members {
			var nic struct{ MACAddress string }
			if _, err := svc.do(hc, http.MethodGet, m.ID, nil, &nic); err != nil {
				return nil, err
			}
			if nic.MACAddress != "" {
				out = append(out, strings.ToLower(nic.MACAddress))
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s has no MAC address", system)
		}
		macs[system] = out
		return out, nil
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Events []struct {
				Message           string
				OriginOfCondition struct {
					ID string `json:"@odata.id"`
				}
			}
		}
		err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ev)
		w.WriteHeader(http.StatusNoContent)
		if err != nil {
			return
		}
		for _, e := range ev.Events {
			if !strings.Contains(e.Message, "one-time boot override") || !strings.Contains(e.Message, "(Cd)") {
				continue
			}
			system := e.OriginOfCondition.ID
			go func() {
				ms, err := macsOf(system)
				if err != nil {
					a.logf("event for %s: %v", system, err)
					return
				}
				a.logf("event: %s booted its virtual CD", system)
				a.Booted(ms...)
			}()
		}
	})
	serve(a.t, ln, handler)
	var sub struct {
		ID string `json:"@odata.id"`
	}
	resp, err := svc.do(hc, http.MethodPost, "/redfish/v1/EventService/Subscriptions", map[string]any{
		"Destination": "http://" + ln.Addr().String() + "/events",
		"Protocol":    "Redfish",
		"Context":     "ironictest agent",
		"EventTypes":  []string{"ResourceUpdated"},
	}, &sub)
	if err != nil {
		return fmt.Errorf("subscribe to %s's events: %w", svc.URL, err)
	}
	loc := resp.Header.Get("Location")
	a.t.Cleanup(func() {
		if loc != "" {
			_, _ = svc.do(hc, http.MethodDelete, strings.TrimPrefix(loc, strings.TrimSuffix(svc.URL, "/")), nil, nil) // a path, or a URL under svc.URL
		}
	})
	return nil
}
