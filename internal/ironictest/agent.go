package ironictest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/pki"
)

// Agent stands in for ironic-python-agent (IPA), the agent Ironic's deploy
// ramdisk runs. Told that a node booted the deploy image (Booted), it does
// what IPA does from there, as Metal3's fake-ipa does:
//
//   - lookup: GET /v1/lookup?addresses=MACS until Ironic knows the node and
//     waits for it (the lookup of a node in a wait state), taking the agent
//     token Ironic hands out once per boot;
//   - heartbeat: POST /v1/heartbeat/UUID with its callback URL, the token,
//     an agent version and its certificate (agent_verify_ca), every
//     HeartbeatEvery and at once after each command (IPA's forced
//     heartbeat), until Ironic refuses the token (the node was
//     power-cycled: that ramdisk is gone), another boot of the node begins,
//     or it runs standby.power_off;
//   - the commands API at the callback URL, over TLS with a self-signed
//     certificate for its address, as IPA's automatic TLS serves it
//     (Ironic 29 refuses a callback URL that is not https://: its
//     [agent]require_tls is true by default; 21.4's was false) (GET and POST
//     /UUID/v1/commands/): the clean and deploy steps Ironic asks for
//     (get_*_steps lists erase_devices_metadata as the in-band clean step;
//     execute_*_step, write_image included, succeeds at once),
//     standby.get_partition_uuids, standby.power_off, standby.sync,
//     image.install_bootloader. Commands must carry the token.
//
// It touches no disk: what an image write would do is not simulated.
type Agent struct {
	t     testing.TB
	ir    *Ironic
	base  string // https://HOST:PORT, the callback URL's prefix
	cert  string // the API's certificate (PEM), agent_verify_ca
	every time.Duration

	mu       sync.Mutex
	sessions map[string]*session // by node UUID once looked up
	booting  map[string]*session // by the boot's first MAC, until looked up
	boots    map[string]int      // boots seen, by node UUID
	log      []string
}

// session is one boot of the agent on one node.
type session struct {
	macs   []string
	node   string // Ironic's node UUID, after the lookup
	token  string
	cmds   []*command
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// command is one command as the agent API reports it.
type command struct {
	ID     string         `json:"id"`
	Name   string         `json:"command_name"`
	Params map[string]any `json:"command_params"`
	Status string         `json:"command_status"`
	Error  any            `json:"command_error"`
	Result any            `json:"command_result"`
}

func newAgent(t testing.TB, ir *Ironic, ln net.Listener, every time.Duration) *Agent {
	// IPA's automatic TLS (Ironic API 1.68 and later): a self-signed
	// certificate for the address it advertises, which Ironic then
	// verifies its calls against.
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	certPEM, keyPEM, err := pki.SelfSigned([]string{host}, time.Now(), 30*24*time.Hour)
	if err != nil {
		t.Fatalf("ironictest: the agent's certificate: %v", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("ironictest: the agent's certificate: %v", err)
	}
	a := &Agent{t: t, ir: ir, base: "https://" + ln.Addr().String(), cert: string(certPEM), every: every,
		sessions: map[string]*session{}, booting: map[string]*session{}, boots: map[string]int{}}
	serve(t, tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), a)
	t.Cleanup(a.stopAll)
	return a
}

// Booted tells the agent that the machine with these MAC addresses booted
// the deploy image: it looks the node up and heartbeats from now on. A boot
// of a node that had a session ends that one.
func (a *Agent) Booted(macs ...string) {
	s := &session{macs: macs, kick: make(chan struct{}, 1), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	a.mu.Lock()
	key := strings.ToLower(macs[0])
	if old := a.booting[key]; old != nil {
		old.cancel()
	}
	a.booting[key] = s
	a.mu.Unlock()
	a.logf("boot of %s: looking up", strings.Join(macs, ","))
	go a.run(ctx, s)
}

// PoweredOff tells the agent that the machine with these MAC addresses
// powered off (Metal3's fake-ipa stops its agent on any pending power
// state but On): the agent booted there, looking its node up or
// heartbeating, is gone.
func (a *Agent) PoweredOff(macs ...string) {
	a.mu.Lock()
	s := a.booting[strings.ToLower(macs[0])]
	a.mu.Unlock()
	if s == nil {
		return
	}
	select {
	case <-s.done:
	default:
		a.logf("%s powered off: the agent booted there is gone", strings.Join(macs, ","))
		s.cancel()
	}
}

// Boots counts the agent's boots on a node that reached Ironic (looked up).
func (a *Agent) Boots(node string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.boots[node]
}

// Running reports whether the agent runs on a node (looked up and
// heartbeating).
func (a *Agent) Running(node string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[node] != nil
}

// Log is what the agent did, one line an event, for failures.
func (a *Agent) Log() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.log, "\n")
}

func (a *Agent) logf(format string, args ...any) {
	line := time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
	a.mu.Lock()
	a.log = append(a.log, line)
	a.mu.Unlock()
}

func (a *Agent) stopAll() {
	a.mu.Lock()
	var all []*session
	for _, s := range a.booting {
		all = append(all, s)
	}
	a.mu.Unlock()
	for _, s := range all {
		s.cancel()
		<-s.done
	}
}

// ramdisk API microversions: lookup with a token needs 1.62, the agent's
// certificate in a heartbeat (agent_verify_ca) 1.68.
const agentAPIVersion = "1.68"

// agentVersion is the IPA version it claims: the one that goes with the
// release (IPA 9.4 with Ironic 21.4, 2023.1; Debian 13 packages IPA 10.2.0
// beside Ironic 29.0.5).
func agentVersion(r Release) string {
	if r == Ironic21 {
		return "9.4.1"
	}
	return "10.2.0"
}

func (a *Agent) run(ctx context.Context, s *session) {
	defer close(s.done)
	defer s.cancel()
	// Lookup: Ironic answers 404 until the node waits for its agent.
	var found struct {
		Node struct {
			UUID string `json:"uuid"`
		} `json:"node"`
		Config struct {
			Token string `json:"agent_token"`
		} `json:"config"`
	}
	path := "/v1/lookup?addresses=" + strings.Join(s.macs, ",")
	for {
		err := a.ramdisk(ctx, http.MethodGet, path, nil, &found)
		if err == nil && found.Node.UUID != "" {
			break
		}
		select {
		case <-ctx.Done():
			a.logf("boot of %s ended before Ironic knew the node (%v)", s.macs[0], err)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	if len(found.Config.Token) < 32 {
		// "******": the token was handed out before, to someone else.
		a.logf("lookup of %s: node %s gave no token (%q): the agent cannot run", s.macs[0], found.Node.UUID, found.Config.Token)
		return
	}
	s.node, s.token = found.Node.UUID, found.Config.Token
	a.mu.Lock()
	if old := a.sessions[s.node]; old != nil && old != s {
		old.cancel()
	}
	a.sessions[s.node] = s
	a.boots[s.node]++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		if a.sessions[s.node] == s {
			delete(a.sessions, s.node)
		}
		a.mu.Unlock()
	}()
	a.logf("lookup of %s: node %s", s.macs[0], s.node)

	tick := time.NewTicker(a.every)
	defer tick.Stop()
	for {
		err := a.ramdisk(ctx, http.MethodPost, "/v1/heartbeat/"+s.node, map[string]any{
			"callback_url":    a.base + "/" + s.node,
			"agent_token":     s.token,
			"agent_version":   agentVersion(a.ir.Release),
			"agent_verify_ca": a.cert,
		}, nil)
		var ae *APIError
		var soon <-chan time.Time // nil: wait for the tick or a command
		switch {
		case err == nil:
		case asAPIError(err, &ae) && ae.Status == http.StatusConflict:
			// The node is locked by the conductor: try again soon (in
			// a second, or at the tick if that is sooner), as IPA
			// retries a failed heartbeat sooner than its interval.
			soon = time.After(min(time.Second, a.every))
		case asAPIError(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusNotFound || ae.Status == http.StatusForbidden):
			a.logf("node %s: heartbeat refused (%d %s): this boot of the agent is over", s.node, ae.Status, ae.Body)
			return
		default:
			a.logf("node %s: heartbeat: %v", s.node, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-tick.C:
		case <-soon:
		}
	}
}

func asAPIError(err error, ae **APIError) bool {
	e, ok := err.(*APIError)
	if ok {
		*ae = e
	}
	return ok
}

// ramdisk calls Ironic's API as the agent does: the ramdisk microversion,
// no credentials.
func (a *Agent) ramdisk(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.ir.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", agentAPIVersion)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.ir.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// ServeHTTP is the agent's API, which Ironic calls at the callback URL:
// /NODE/v1/commands/ and /NODE/v1/commands/ID.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	node, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	a.mu.Lock()
	s := a.sessions[node]
	a.mu.Unlock()
	if s == nil {
		agentError(w, http.StatusNotFound, "no agent runs on node "+node)
		return
	}
	rest = strings.TrimSuffix(rest, "/")
	switch {
	case rest == "v1/commands" && r.Method == http.MethodGet:
		a.mu.Lock()
		list := append([]*command{}, s.cmds...)
		a.mu.Unlock()
		writeAgentJSON(w, http.StatusOK, map[string]any{"commands": list})
	case strings.HasPrefix(rest, "v1/commands/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(rest, "v1/commands/")
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, c := range s.cmds {
			if c.ID == id {
				writeAgentJSON(w, http.StatusOK, c)
				return
			}
		}
		agentError(w, http.StatusNotFound, "no command "+id)
	case rest == "v1/commands" && r.Method == http.MethodPost:
		if r.URL.Query().Get("agent_token") != s.token {
			agentError(w, http.StatusUnauthorized, "Token invalid.")
			return
		}
		var body struct {
			Name   string         `json:"name"`
			Params map[string]any `json:"params"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil || body.Name == "" {
			agentError(w, http.StatusBadRequest, "Missing or invalid name or params")
			return
		}
		c := a.execute(s, body.Name, body.Params)
		writeAgentJSON(w, http.StatusOK, c)
		if c.Name == "power_off" {
			a.logf("node %s: standby.power_off: the ramdisk powers the machine off", s.node)
			s.cancel()
			return
		}
		select { // a forced heartbeat, as IPA sends after a command
		case s.kick <- struct{}{}:
		default:
		}
	default:
		agentError(w, http.StatusNotFound, "no such resource: "+r.URL.Path)
	}
}

// execute runs one command and records its result.
func (a *Agent) execute(s *session, name string, params map[string]any) *command {
	ext, cmd, _ := strings.Cut(name, ".")
	c := &command{ID: newID(), Name: cmd, Params: params, Status: "SUCCEEDED"}
	switch name {
	case "clean.get_clean_steps":
		c.Result = map[string]any{
			"clean_steps": map[string]any{"GenericHardwareManager": []any{
				map[string]any{"step": "erase_devices_metadata", "priority": 99, "interface": "deploy", "reboot_requested": false, "abortable": true},
			}},
			"hardware_manager_version": map[string]any{"generic_hardware_manager": "1.1"},
		}
	case "deploy.get_deploy_steps":
		// IPA's in-band deploy steps, all off unless asked for (priority
		// 0). The list must not be empty: Ironic asks again at every
		// heartbeat while its cache of them is empty, and that answer then
		// hides the step it waits for.
		c.Result = map[string]any{
			"deploy_steps": map[string]any{"GenericHardwareManager": []any{
				map[string]any{"step": "write_image", "priority": 0, "interface": "deploy", "reboot_requested": false},
				map[string]any{"step": "inject_files", "priority": 0, "interface": "deploy", "reboot_requested": false},
			}},
			"hardware_manager_version": map[string]any{"generic_hardware_manager": "1.1"},
		}
	case "clean.execute_clean_step":
		c.Result = map[string]any{"clean_result": nil, "clean_step": params["step"]}
	case "deploy.execute_deploy_step":
		c.Result = map[string]any{"deploy_result": nil, "deploy_step": params["step"]}
	case "standby.get_partition_uuids":
		c.Result = map[string]any{}
	case "standby.power_off", "standby.sync", "image.install_bootloader":
		c.Result = nil
	default:
		c.Status = "FAILED"
		c.Error = map[string]any{"type": "InvalidCommandError", "code": 400, "message": "the stand-in agent does not run " + ext + "." + cmd, "details": ""}
	}
	a.mu.Lock()
	s.cmds = append(s.cmds, c)
	a.mu.Unlock()
	a.logf("node %s: %s -> %s", s.node, name, c.Status)
	return c
}

func writeAgentJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func agentError(w http.ResponseWriter, status int, msg string) {
	writeAgentJSON(w, status, map[string]any{"faultstring": msg, "faultcode": "Client"})
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%s-%s-%s-%s", hex.EncodeToString(b[0:4]), hex.EncodeToString(b[4:6]),
		hex.EncodeToString(b[6:8]), hex.EncodeToString(b[8:10]), hex.EncodeToString(b[10:16]))
}
