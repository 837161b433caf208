package ironictest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"sort"
	"testing"
	"time"
)

// Step runs an Ironic step on every node at once (target: manage,
// inspect, provide, active, deleted) and waits for each to reach want; a
// failure says which step and node, with Ironic's last_error and the
// agent's log.
func (ir *Ironic) Step(t testing.TB, name, target, want string, timeout time.Duration, nodes ...string) {
	t.Helper()
	start := time.Now()
	for _, n := range nodes {
		if err := ir.Provision(n, target, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, n := range nodes {
		if _, err := ir.Wait(name, n, want, timeout); err != nil {
			t.Fatalf("%v\nagent:\n%s", err, ir.Agent.Log())
		}
	}
	t.Logf("%s of %d node(s): %s", name, len(nodes), time.Since(start).Round(100*time.Millisecond))
}

// ImageInstanceInfo is the instance_info of a raw whole-disk image at url
// (the file served there) that Ironic's direct deploy hands the agent: its
// sha256 and its format. The format matters: without it
// ironic-python-agent 10.2 inspects the image itself, finds "gpt" and has
// qemu-img convert from a format qemu-img does not know ("Unknown driver
// 'gpt'"); with "raw" it streams the image onto the disk.
func ImageInstanceInfo(t testing.TB, url, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	hexsum := hex.EncodeToString(sum[:])
	return map[string]any{"image_source": url, "image_checksum": hexsum, "image_os_hash_algo": "sha256",
		"image_os_hash_value": hexsum, "image_disk_format": "raw"}
}

// ImageInfo is ImageInstanceInfo as the JSON-patch operations that add it
// to a node's instance_info (mind Patch's note on Ironic 29).
func ImageInfo(t testing.TB, url, file string) []map[string]any {
	t.Helper()
	info := ImageInstanceInfo(t, url, file)
	keys := make([]string, 0, len(info))
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ops []map[string]any
	for _, k := range keys {
		ops = append(ops, map[string]any{"op": "add", "path": "/instance_info/" + k, "value": info[k]})
	}
	return ops
}
