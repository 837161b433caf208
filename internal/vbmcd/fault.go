package vbmcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/machine"
)

// The admin socket: a Unix socket in the state directory (0600, so root
// only, like the state) on which `vbmcd fault` sets and clears the faults
// of a running daemon. It speaks a small JSON API:
//
//	GET    /faults            the faults in force, by machine
//	PUT    /faults/{machine}  set a machine's faults (faultSpec)
//	DELETE /faults/{machine}  clear them

const adminSocketName = "admin.sock"

// faultSpec is a Fault as a client gives it: durations as text, the down
// window as a length from now. Machine names the machine in the config
// file's fault: list; the admin API takes it from the path.
type faultSpec struct {
	Machine       string `json:"machine,omitempty"`
	Latency       string `json:"latency,omitempty"`
	HTTPErrors    int    `json:"httpErrors,omitempty"`
	HTTPStatus    int    `json:"httpStatus,omitempty"`
	IPMIDrop      int    `json:"ipmiDrop,omitempty"`
	RefusePowerOn bool   `json:"refusePowerOn,omitempty"`
	MediaStuck    bool   `json:"mediaStuck,omitempty"`
	Down          string `json:"down,omitempty"`
}

func (f faultSpec) fault(now time.Time) (machine.Fault, error) {
	out := machine.Fault{HTTPErrors: f.HTTPErrors, HTTPStatus: f.HTTPStatus, IPMIDrop: f.IPMIDrop, RefusePowerOn: f.RefusePowerOn, MediaStuck: f.MediaStuck}
	for _, d := range []struct {
		name, text string
		set        func(time.Duration)
	}{
		{"latency", f.Latency, func(v time.Duration) { out.Latency = v }},
		{"down", f.Down, func(v time.Duration) { out.DownUntil = now.Add(v) }},
	} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil || v < 0 {
			return out, fmt.Errorf("%s %q: want a duration such as 200ms or 30s", d.name, d.text)
		}
		d.set(v)
	}
	return out, nil
}

// faultView is a machine's faults as the API shows them.
type faultView struct {
	Machine string        `json:"machine"`
	Name    string        `json:"name"`
	Fault   machine.Fault `json:"fault"`
}

// adminHandler serves the admin socket's API over svc.
func adminHandler(svc *machine.Service) http.Handler {
	mux := http.NewServeMux()
	personalityRoutes(mux, svc)
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) {
		var out []faultView
		for id, f := range svc.Faults() {
			v := faultView{Machine: id, Fault: f}
			if m, err := svc.Get(id); err == nil {
				v.Name = m.Name
			}
			out = append(out, v)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		writeAdmin(w, http.StatusOK, out)
	})
	set := func(w http.ResponseWriter, id string, f machine.Fault) {
		m, err := svc.SetFault(id, f)
		var v faultView
		if err == nil {
			v = faultView{Machine: m.ID, Name: m.Name, Fault: f}
		}
		answerAdmin(w, id, v, err)
	}
	mux.HandleFunc("PUT /faults/{machine}", func(w http.ResponseWriter, r *http.Request) {
		var spec faultSpec
		if !readAdmin(w, r, "a fault", &spec) {
			return
		}
		if spec.Machine != "" && spec.Machine != r.PathValue("machine") {
			writeAdmin(w, http.StatusBadRequest, map[string]string{"error": "the body names machine " + spec.Machine + ", the path " + r.PathValue("machine")})
			return
		}
		f, err := spec.fault(time.Now())
		if err != nil {
			writeAdmin(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		set(w, r.PathValue("machine"), f)
	})
	mux.HandleFunc("DELETE /faults/{machine}", func(w http.ResponseWriter, r *http.Request) {
		set(w, r.PathValue("machine"), machine.Fault{})
	})
	return mux
}

// readAdmin decodes an admin request's JSON body (at most 64 KiB, no
// unknown field) into v; else it answers 400, saying the body is not what
// (a fault, a personality), and returns false.
func readAdmin(w http.ResponseWriter, r *http.Request, what string, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": "not " + what + ": " + err.Error()})
		return false
	}
	return true
}

// answerAdmin answers a change to machine id: 404 when there is no such
// machine, 400 for another error, else 200 with v.
func answerAdmin(w http.ResponseWriter, id string, v any, err error) {
	switch {
	case errors.Is(err, machine.ErrNotFound):
		writeAdmin(w, http.StatusNotFound, map[string]string{"error": "no machine " + id})
	case err != nil:
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	default:
		writeAdmin(w, http.StatusOK, v)
	}
}

func writeAdmin(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// listenAdmin opens the admin socket in dir, 0600, replacing a stale one.
func listenAdmin(dir string) (net.Listener, string, error) {
	path := filepath.Join(dir, adminSocketName)
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, "", fmt.Errorf("another vbmcd serves %s; give each daemon its own --state-dir", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, "", fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, "", err
	}
	return ln, path, nil
}

// adminClient talks to the admin socket in a state directory.
func adminClient(stateDir string) (*http.Client, string) {
	path := filepath.Join(stateDir, adminSocketName)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}, path
}

// newFaultCommand is `vbmcd fault`.
func newFaultCommand(stateDir func() (string, error), out io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "fault",
		Short: "Make a machine's BMC misbehave on purpose, in a running vbmcd (for testing clients' retries)",
		Long: `Faults are injected into a running vbmcd over its admin socket (--state-dir/admin.sock),
per machine (UUID or name), on both faces: latency, Redfish requests answered 503 or 409,
IPMI packets dropped, power-ons refused (accepted, then the machine stays off and says why),
and a BMC reboot window during which nothing answers. They last until cleared (counts until
used up) and are gone when vbmcd restarts.`,
	}
	faults := adminResource[faultView]{
		stateDir: stateDir, out: out, path: "/faults", header: "MACHINE\tUUID\tFAULTS",
		row: func(v faultView) []string { return []string{v.Name, v.Machine, describe(v.Fault)} },
	}
	var spec faultSpec
	set := faults.command("set MACHINE [--latency D] [--http-errors N [--http-status 503|409]] [--ipmi-drop N] [--refuse-power-on] [--media-stuck] [--down D]",
		"Set (replace) a machine's faults", cobra.ExactArgs(1), http.MethodPut, func([]string) any { return spec })
	f := set.Flags()
	f.StringVar(&spec.Latency, "latency", "", "delay every Redfish request and IPMI packet of the machine (e.g. 500ms)")
	f.IntVar(&spec.HTTPErrors, "http-errors", 0, "answer the machine's next N Redfish requests with --http-status")
	f.IntVar(&spec.HTTPStatus, "http-status", 503, "503 (with Retry-After) or 409")
	f.IntVar(&spec.IPMIDrop, "ipmi-drop", 0, "drop the BMC's next N IPMI packets")
	f.BoolVar(&spec.RefusePowerOn, "refuse-power-on", false, "power-ons are accepted, and the machine stays off (Status.Health Critical, IPMI power fault)")
	f.BoolVar(&spec.MediaStuck, "media-stuck", false, "virtual-media inserts stay Running with nothing attached until the fault is cleared (they then go on) or the media ejected")
	f.StringVar(&spec.Down, "down", "", "a BMC reboot window: nothing answers for the machine for this long (e.g. 30s)")
	clear := faults.command("clear MACHINE", "Clear a machine's faults", cobra.ExactArgs(1), http.MethodDelete, nil)
	list := faults.command("list", "List the faults in force", cobra.NoArgs, http.MethodGet, nil)
	c.AddCommand(set, clear, list)
	return c
}

// adminCall sends one request to the admin socket of the daemon whose state
// directory stateDir gives, and returns the body of its 200 answer; another
// answer is the error it names.
func adminCall(stateDir func() (string, error), method, path string, body any) ([]byte, error) {
	dir, err := stateDir()
	if err != nil {
		return nil, err
	}
	hc, sock := adminClient(dir)
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, "http://vbmcd"+path, rd)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no vbmcd answers on %s (%v); is it running with this --state-dir?", sock, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		_ = json.Unmarshal(b, &e)
		return nil, errors.New(e.Error)
	}
	return b, nil
}

// adminResource is a collection on the admin socket that a command group
// of vbmcd edits (fault: /faults, personality: /personalities), each entry
// a machine's, shown as a view V.
type adminResource[V any] struct {
	stateDir func() (string, error)
	out      io.Writer
	path     string           // the collection's path
	header   string           // the list's header
	row      func(V) []string // a view's columns, its name and UUID first
}

// command is a subcommand that makes one admin call (adminCall) with
// method: on the collection when it takes no arguments, else on the entry
// of the machine its first argument names, with body(args) as the request
// (none when body is nil). It prints the answer: for a GET a table of the
// views under the header, a row each; else the one view the call changed,
// as "NAME (UUID): the rest".
func (r adminResource[V]) command(use, short string, args cobra.PositionalArgs, method string, body func(args []string) any) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, RunE: func(_ *cobra.Command, args []string) error {
		path := r.path
		if len(args) > 0 {
			path += "/" + args[0]
		}
		var req any
		if body != nil {
			req = body(args)
		}
		return r.print(method, path, req)
	}}
}

// print makes the call and prints its answer (see command).
func (r adminResource[V]) print(method, path string, body any) error {
	b, err := adminCall(r.stateDir, method, path, body)
	if err != nil {
		return err
	}
	if method != http.MethodGet {
		var v V
		_ = json.Unmarshal(b, &v)
		cols := r.row(v)
		fmt.Fprintf(r.out, "%s (%s): %s\n", cols[0], cols[1], strings.Join(cols[2:], " "))
		return nil
	}
	var vs []V
	_ = json.Unmarshal(b, &vs)
	tw := tabwriter.NewWriter(r.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, r.header)
	for _, v := range vs {
		fmt.Fprintln(tw, strings.Join(r.row(v), "\t"))
	}
	return tw.Flush()
}

// describe says what a Fault does, briefly.
func describe(f machine.Fault) string {
	var parts []string
	if f.Latency > 0 {
		parts = append(parts, "latency "+f.Latency.String())
	}
	if f.HTTPErrors > 0 {
		parts = append(parts, fmt.Sprintf("next %d Redfish requests %d", f.HTTPErrors, f.HTTPStatus))
	}
	if f.IPMIDrop > 0 {
		parts = append(parts, fmt.Sprintf("next %d IPMI packets dropped", f.IPMIDrop))
	}
	if f.RefusePowerOn {
		parts = append(parts, "power-on refused")
	}
	if f.MediaStuck {
		parts = append(parts, "media inserts held")
	}
	if !f.DownUntil.IsZero() {
		parts = append(parts, "down until "+f.DownUntil.Format(time.TimeOnly))
	}
	if parts == nil {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// faultList is the fault flag and the config file's fault: list: one JSON
// object per machine, a faultSpec with its machine (name or UUID).
type faultList struct{ specs *[]faultSpec }

func (l *faultList) String() string { return "" }
func (l *faultList) Type() string   { return "json" }
func (l *faultList) Set(v string) error {
	var spec faultSpec
	if err := decodeStrict(v, &spec); err != nil {
		return fmt.Errorf("%s: want a JSON object such as {\"machine\":\"node-0\",\"latency\":\"300ms\"}: %w", v, err)
	}
	if spec.Machine == "" {
		return fmt.Errorf("%s: name the machine (\"machine\": its domain name or UUID)", v)
	}
	if _, err := spec.fault(time.Now()); err != nil {
		return fmt.Errorf("machine %s: %w", spec.Machine, err)
	}
	*l.specs = append(*l.specs, spec)
	return nil
}

// applyFaults sets the configured faults on their machines at start-up; a
// machine that is not there is an error, so a typo does not leave a test
// run without the fault it meant to have.
func applyFaults(svc *machine.Service, specs []faultSpec) error {
	for _, spec := range specs {
		f, err := spec.fault(time.Now())
		if err == nil {
			_, err = svc.SetFault(spec.Machine, f)
		}
		if errors.Is(err, machine.ErrNotFound) {
			return fmt.Errorf("fault: no machine %s (name a served domain or its UUID; vbmcd ipmi list shows them)", spec.Machine)
		}
		if err != nil {
			return fmt.Errorf("fault for %s: %w", spec.Machine, err)
		}
	}
	return nil
}
