package labvirt

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestHostFiles: the provider writes the files the network step declares
// on this machine, byte for byte as netplumb gives them: NetworkManager's
// snippet only where NetworkManager is, the resolver drop-in unless a file
// without the lab's mark is there; it reads back whose they are and
// removes the lab's only. It needs no libvirt.
func TestHostFiles(t *testing.T) {
	ctx := context.Background()
	r := &Host{}
	conf := filepath.Join(t.TempDir(), "NetworkManager", "conf.d")
	nm := lab.Unmanaged{Unmanaged: netplumb.Unmanaged{ConfDir: conf, Lab: "hf", Links: []string{"baremetal", "bmlab-veth0"}}}
	path := filepath.Join(conf, "90-bmlab-hf.conf")
	if wrote, err := r.Ensure(ctx, nm); err != nil || wrote != nil {
		t.Fatalf("ensure without NetworkManager = %q, %v; want nothing", wrote, err)
	}
	if ds, err := r.Differences(ctx, nm); err != nil || len(ds) != 0 {
		t.Fatalf("differences without NetworkManager = %v, %v; want none", ds, err)
	}
	noErr(t, os.Mkdir(filepath.Dir(conf), 0o755))
	if ds, err := r.Differences(ctx, nm); err != nil || len(ds) != 1 || ds[0].Object != path {
		t.Fatalf("differences before ensure = %v, %v; want the snippet's path", ds, err)
	}
	if wrote, err := r.Ensure(ctx, nm); err != nil || !cmp.Equal(wrote, []string{path}) {
		t.Fatalf("ensure = %q, %v; want %s", wrote, err, path)
	}
	want := "# Written by bmlab (labctl net) for the lab \"hf\": NetworkManager must leave\n" +
		"# the lab's links alone. `labctl net down` removes this file.\n" +
		"[keyfile]\nunmanaged-devices+=interface-name:baremetal;interface-name:bmlab-veth0\n"
	if got, err := os.ReadFile(path); err != nil || string(got) != want {
		t.Errorf("snippet = %q, %v; want %q", got, err, want)
	}
	if wrote, err := r.Ensure(ctx, nm); err != nil || wrote != nil {
		t.Errorf("second ensure = %q, %v; want nothing", wrote, err)
	}
	if found, owner, err := r.Owner(ctx, lab.KindUnmanaged, path); !found || owner != "hf" || err != nil {
		t.Errorf("owner = %v %q %v; want the lab's", found, owner, err)
	}
	if err := r.Delete(ctx, lab.KindUnmanaged, path, "other"); !errors.Is(err, lab.ErrForeign) {
		t.Errorf("delete by another lab = %v, want ErrForeign", err)
	}
	noErr(t, r.Delete(ctx, lab.KindUnmanaged, path, "hf"))
	if found, _, err := r.Owner(ctx, lab.KindUnmanaged, path); found || err != nil {
		t.Errorf("after delete: found %v, %v", found, err)
	}

	drop := filepath.Join(t.TempDir(), "dnsmasq.d", "bmlab-hf.conf")
	d := lab.ResolverDropIn{ResolverDropIn: netplumb.ResolverDropIn{Kind: netplumb.ResolverDnsmasq, Path: drop, Lab: "hf", Domain: "hf.lab.test", DNS: netip.MustParseAddr("10.0.0.1")}}
	if ds, err := r.Differences(ctx, d); err != nil || !cmp.Equal(ds, []lab.Difference{{Object: drop, Got: "missing"}}) {
		t.Errorf("differences before ensure = %v, %v", ds, err)
	}
	if wrote, err := r.Ensure(ctx, d); err != nil || !cmp.Equal(wrote, []string{drop}) {
		t.Fatalf("ensure = %q, %v; want %s", wrote, err, drop)
	}
	want = "# bmlab lab hf: the names of cluster hf.lab.test for this host. labctl writes this\n" +
		"# file (`labctl up`, `labctl net repair`) and removes it (`labctl down`).\nserver=/hf.lab.test/10.0.0.1\n"
	if got, err := os.ReadFile(drop); err != nil || string(got) != want {
		t.Errorf("drop-in = %q, %v; want %q", got, err, want)
	}
	if found, owner, err := r.Owner(ctx, lab.KindResolver, drop); !found || owner != "hf" || err != nil {
		t.Errorf("owner = %v %q %v; want the lab's", found, owner, err)
	}
	noErr(t, r.Delete(ctx, lab.KindResolver, drop, "hf"))
	// A file without the lab's mark: blocking, never written over nor
	// removed.
	noErr(t, os.WriteFile(drop, []byte("server=/example.test/192.0.2.1\n"), 0o644))
	if ds, err := r.Differences(ctx, d); err != nil || len(ds) != 1 || !ds[0].Blocking {
		t.Errorf("differences over a foreign file = %v, %v; want one blocking", ds, err)
	}
	if _, err := r.Ensure(ctx, d); !errors.Is(err, netplumb.ErrNotLabs) {
		t.Errorf("ensure over a foreign file = %v, want ErrNotLabs", err)
	}
	if found, owner, err := r.Owner(ctx, lab.KindResolver, drop); !found || owner != "" || err != nil {
		t.Errorf("owner of a foreign file = %v %q %v; want found, none's", found, owner, err)
	}
	if err := r.Delete(ctx, lab.KindResolver, drop, "hf"); !errors.Is(err, lab.ErrForeign) {
		t.Errorf("delete of a foreign file = %v, want ErrForeign", err)
	}
	if got, _ := os.ReadFile(drop); string(got) != "server=/example.test/192.0.2.1\n" {
		t.Errorf("the foreign file changed: %q", got)
	}
}

// TestImage: the provider reads an image with the real qemu-img: a qcow2's
// format and virtual size, a raw file's format, a missing file's error.
func TestImage(t *testing.T) {
	ctx := context.Background()
	qemuImg := testenv.Command(t, "qemu-img")
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", img, "3M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}
	raw := filepath.Join(dir, "disk.raw")
	noErr(t, os.WriteFile(raw, make([]byte, 1<<20), 0o644))
	r := &Host{}
	for _, tt := range []struct {
		path string
		want lab.ImageInfo
	}{{img, lab.ImageInfo{Format: "qcow2", VirtualSize: 3 << 20}}, {raw, lab.ImageInfo{Format: "raw", VirtualSize: 1 << 20}}} {
		if got, err := r.Image(ctx, tt.path); err != nil || got != tt.want {
			t.Errorf("Image(%s) = %+v, %v; want %+v", tt.path, got, err, tt.want)
		}
	}
	if _, err := r.Image(ctx, filepath.Join(dir, "gone.qcow2")); err == nil {
		t.Error("Image of a missing file: no error")
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
