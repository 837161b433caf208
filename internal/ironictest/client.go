package ironictest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// apiVersion is the microversion the client asks for: Ironic 21.4's
// newest.
const apiVersion = "1.82"

// Node is what the tests read of an Ironic node.
type Node struct {
	UUID                 string         `json:"uuid"`
	Name                 string         `json:"name"`
	Driver               string         `json:"driver"`
	ProvisionState       string         `json:"provision_state"`
	TargetProvisionState *string        `json:"target_provision_state"`
	PowerState           *string        `json:"power_state"`
	TargetPowerState     *string        `json:"target_power_state"`
	LastError            *string        `json:"last_error"`
	Maintenance          bool           `json:"maintenance"`
	MaintenanceReason    *string        `json:"maintenance_reason"`
	Properties           map[string]any `json:"properties"`
	DriverInfo           map[string]any `json:"driver_info"`
	DriverInternalInfo   map[string]any `json:"driver_internal_info"`
	InstanceInfo         map[string]any `json:"instance_info"`
	CleanStep            map[string]any `json:"clean_step"`
	DeployStep           map[string]any `json:"deploy_step"`
	// CreatedAt is the node's enrollment; ProvisionUpdatedAt its last
	// change of provision state (nil before the first).
	CreatedAt          time.Time  `json:"created_at"`
	ProvisionUpdatedAt *time.Time `json:"provision_updated_at"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Power is the node's power state as Ironic last read it ("power on").
func (n Node) Power() string { return str(n.PowerState) }

// LastErr is Ironic's last_error for the node.
func (n Node) LastErr() string { return str(n.LastError) }

// String says where the node is, for failures.
func (n Node) String() string {
	s := fmt.Sprintf("node %s (%s): provision state %q", n.Name, n.UUID, n.ProvisionState)
	if t := str(n.TargetProvisionState); t != "" {
		s += fmt.Sprintf(", target %q", t)
	}
	s += fmt.Sprintf(", power %q", n.Power())
	if n.Maintenance {
		s += fmt.Sprintf(", in maintenance (%s)", str(n.MaintenanceReason))
	}
	if len(n.CleanStep) > 0 {
		s += fmt.Sprintf(", clean step %v", n.CleanStep)
	}
	if len(n.DeployStep) > 0 {
		s += fmt.Sprintf(", deploy step %v", n.DeployStep)
	}
	if e := n.LastErr(); e != "" {
		s += "; last_error: " + e
	}
	return s
}

// APIError is a refused API call.
type APIError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("Ironic API %s %s: %d %s", e.Method, e.Path, e.Status, e.Body)
}

// Do calls Ironic's API and decodes the answer into out (when not nil).
func (ir *Ironic) Do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, ir.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", apiVersion)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ir.hc.Do(req)
	if err != nil {
		return fmt.Errorf("Ironic API %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode >= 300 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("Ironic API %s %s: %w: %s", method, path, err, b)
		}
	}
	return nil
}

// NodeSpec is a node to enroll.
type NodeSpec struct {
	Name       string
	Driver     string            // redfish or ipmi
	DriverInfo map[string]any    // the BMC: address, credentials, CA, deploy image
	Interfaces map[string]string // e.g. "boot_interface": "redfish-virtual-media"
	Properties map[string]any
	// MACs become ports (as an operator or install-config's bootMACAddress
	// gives them); inspection adds the rest.
	MACs []string
	// InstanceInfo is the node's instance_info from the start (the image
	// to deploy: ImageInstanceInfo). On Ironic 29.0.5 set it here rather
	// than by Patch: see Patch.
	InstanceInfo map[string]any
}

// Enroll creates the node and its ports; it is in "enroll".
func (ir *Ironic) Enroll(spec NodeSpec) (Node, error) {
	body := map[string]any{"name": spec.Name, "driver": spec.Driver, "driver_info": spec.DriverInfo}
	for k, v := range spec.Interfaces {
		body[k] = v
	}
	if spec.Properties != nil {
		body["properties"] = spec.Properties
	}
	if spec.InstanceInfo != nil {
		body["instance_info"] = spec.InstanceInfo
	}
	var n Node
	if err := ir.Do(http.MethodPost, "/v1/nodes", body, &n); err != nil {
		return n, fmt.Errorf("enroll %s: %w", spec.Name, err)
	}
	for _, mac := range spec.MACs {
		if err := ir.Do(http.MethodPost, "/v1/ports", map[string]any{"node_uuid": n.UUID, "address": mac, "pxe_enabled": true}, nil); err != nil {
			return n, fmt.Errorf("port %s of %s: %w", mac, spec.Name, err)
		}
	}
	return n, nil
}

// Node reads a node by name or UUID.
func (ir *Ironic) Node(id string) (Node, error) {
	var n Node
	err := ir.Do(http.MethodGet, "/v1/nodes/"+id, nil, &n)
	return n, err
}

// Ports returns the MAC addresses of a node's ports.
func (ir *Ironic) Ports(id string) ([]string, error) {
	var out struct {
		Ports []struct {
			Address string `json:"address"`
		} `json:"ports"`
	}
	if err := ir.Do(http.MethodGet, "/v1/ports?node="+id, nil, &out); err != nil {
		return nil, err
	}
	var macs []string
	for _, p := range out.Ports {
		macs = append(macs, p.Address)
	}
	return macs, nil
}

// Patch applies JSON-patch operations to a node
// ({"op": "add", "path": "/instance_info/image_source", "value": URL}).
//
// Ironic 29.0.5 (Debian's 1:29.0.5-0+deb13u3) makes a node its own parent
// node on every PATCH (api/controllers/v1/node.py's patch takes the node
// authorize_node_link_patch returns when the patch does not touch
// /parent_node, the node itself, as the new parent_node); from then on
// each power change of the node looks for itself as its child or parent
// and fails on its own lock (ChildNodeLocked, ParentNodeLocked):
// TestIronic29PatchMakesNodeItsOwnParent. Tests that power a node after
// giving it an image set instance_info at enrollment (NodeSpec).
func (ir *Ironic) Patch(id string, ops ...map[string]any) error {
	return ir.Do(http.MethodPatch, "/v1/nodes/"+id, ops, nil)
}

// Provision asks for a provision state change: manage, inspect, provide,
// active, deleted, clean (with extra fields such as clean_steps).
func (ir *Ironic) Provision(id, target string, extra map[string]any) error {
	body := map[string]any{"target": target}
	for k, v := range extra {
		body[k] = v
	}
	return ir.Do(http.MethodPut, "/v1/nodes/"+id+"/states/provision", body, nil)
}

// Power asks for a power state change: "power on", "power off", "rebooting".
func (ir *Ironic) Power(id, target string) error {
	return ir.Do(http.MethodPut, "/v1/nodes/"+id+"/states/power", map[string]any{"target": target}, nil)
}

// failedStates end a provisioning step: the node will not reach what was
// asked without a new request.
var failedStates = map[string]bool{
	"deploy failed": true, "clean failed": true, "inspect failed": true,
	"error": true, "rescue failed": true, "unrescue failed": true, "adopt failed": true,
}

// Wait waits for the node to be in provision state want with no
// transition pending, and returns it. It fails with the step's name, where
// the node is and Ironic's last_error (and its log's tail) when the node
// lands in a failed state, when it settles elsewhere with an error, or at
// the timeout. Call it after the request for the step: Ironic sets the
// target state before the request returns.
func (ir *Ironic) Wait(step, id, want string, timeout time.Duration) (Node, error) {
	deadline := time.Now().Add(timeout)
	var n Node
	var err error
	for {
		n, err = ir.Node(id)
		switch {
		case err != nil:
		case n.ProvisionState == want && str(n.TargetProvisionState) == "":
			return n, nil
		case failedStates[n.ProvisionState] && !failedStates[want]:
			return n, ir.stepError(step, want, n, "it failed")
		case str(n.TargetProvisionState) == "" && n.LastErr() != "":
			// Back where it was, with an error: manage that cannot
			// reach the BMC returns the node to enroll.
			return n, ir.stepError(step, want, n, "Ironic gave up")
		}
		if time.Now().After(deadline) {
			if err != nil {
				return n, fmt.Errorf("%s: waiting for %q: %w", step, want, err)
			}
			return n, ir.stepError(step, want, n, fmt.Sprintf("not there after %s", timeout))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// StepError is a step of a node's life that did not end as it should.
type StepError struct {
	Step, Want string
	Node       Node
	Why        string
	LogTail    string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("%s: want provision state %q, %s: %s\nIronic's log ends:\n%s", e.Step, e.Want, e.Why, e.Node, e.LogTail)
}

func (ir *Ironic) stepError(step, want string, n Node, why string) error {
	return &StepError{Step: step, Want: want, Node: n, Why: why, LogTail: ir.LogTail(25)}
}

// WaitPower waits until Ironic reads the node's power as want ("power
// off", "power on").
func (ir *Ironic) WaitPower(step, id, want string, timeout time.Duration) (Node, error) {
	deadline := time.Now().Add(timeout)
	for {
		n, err := ir.Node(id)
		if err == nil && n.Power() == want && str(n.TargetPowerState) == "" {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, ir.stepError(step, "power "+want, n, fmt.Sprintf("power not %q after %s", want, timeout))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Port is what the tests read of an Ironic port: its MAC address and the
// switch port it is plugged into (local_link_connection: switch_id,
// port_id, switch_info), which inspection reads from LLDP.
type Port struct {
	Address             string            `json:"address"`
	PXEEnabled          bool              `json:"pxe_enabled"`
	LocalLinkConnection map[string]string `json:"local_link_connection"`
}

// PortDetails returns a node's ports.
func (ir *Ironic) PortDetails(id string) ([]Port, error) {
	var out struct {
		Ports []Port `json:"ports"`
	}
	err := ir.Do(http.MethodGet, "/v1/ports/detail?node="+id, nil, &out)
	return out.Ports, err
}

// Inventory is what the agent reported in its inspection of a node, as
// Ironic keeps it (GET /v1/nodes/ID/inventory, API 1.81, Ironic 2023.2
// and later): the hardware inventory and the collectors' plugin data.
type Inventory struct {
	Inventory struct {
		CPU struct {
			Count        int    `json:"count"`
			Architecture string `json:"architecture"`
		} `json:"cpu"`
		Memory struct {
			PhysicalMB int   `json:"physical_mb"`
			Total      int64 `json:"total"`
		} `json:"memory"`
		Disks []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"disks"`
		Interfaces []struct {
			Name       string `json:"name"`
			MACAddress string `json:"mac_address"`
		} `json:"interfaces"`
		BMCAddress string `json:"bmc_address"`
	} `json:"inventory"`
	PluginData map[string]any `json:"plugin_data"`
}

// Inventory returns what the agent's inspection of a node reported.
func (ir *Ironic) Inventory(id string) (Inventory, error) {
	var inv Inventory
	err := ir.Do(http.MethodGet, "/v1/nodes/"+id+"/inventory", nil, &inv)
	return inv, err
}
