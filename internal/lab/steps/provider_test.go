package steps

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/plan"
)

// ownProvider is a provider of the test's own, as a new platform's would
// be: it keeps the host's files in memory instead of writing them, answers
// for images from a table, and records what the steps asked of it. The
// rest is the steps' fake (labtest.Host).
type ownProvider struct {
	*labtest.Host
	images map[string]lab.ImageInfo
	asked  []string
	files  map[string]string // path → the lab whose it is
	sizes  map[string]uint64 // volume → its capacity
}

func (p *ownProvider) Ensure(ctx context.Context, o lab.Object) ([]string, error) {
	p.asked = append(p.asked, fmt.Sprintf("%T", o))
	switch o := o.(type) {
	case lab.Unmanaged:
		return p.keep(o.Path(), o.Lab), nil
	case lab.ResolverDropIn:
		return p.keep(o.Path, o.Lab), nil
	case lab.Volume:
		p.sizes[o.Disk.Volume] = o.Capacity
	}
	return p.Host.Ensure(ctx, o)
}

func (p *ownProvider) keep(path, labName string) []string {
	if p.files[path] == labName {
		return nil
	}
	p.files[path] = labName
	return []string{path}
}

func (p *ownProvider) Differences(ctx context.Context, o lab.Object) ([]lab.Difference, error) {
	switch o := o.(type) {
	case lab.Unmanaged:
		return p.missing(o.Path()), nil
	case lab.ResolverDropIn:
		return p.missing(o.Path), nil
	}
	return p.Host.Differences(ctx, o)
}

func (p *ownProvider) missing(path string) []lab.Difference {
	if _, ok := p.files[path]; ok {
		return nil
	}
	return []lab.Difference{{Object: path, Got: "missing"}}
}

func (p *ownProvider) Owner(ctx context.Context, kind lab.Kind, name string) (bool, string, error) {
	if kind == lab.KindUnmanaged || kind == lab.KindResolver {
		owner, ok := p.files[name]
		return ok, owner, nil
	}
	return p.Host.Owner(ctx, kind, name)
}

func (p *ownProvider) Delete(ctx context.Context, kind lab.Kind, name, labName string) error {
	if kind == lab.KindUnmanaged || kind == lab.KindResolver {
		delete(p.files, name)
		return nil
	}
	return p.Host.Delete(ctx, kind, name, labName)
}

func (p *ownProvider) Image(_ context.Context, path string) (lab.ImageInfo, error) {
	p.asked = append(p.asked, "image "+path)
	info, ok := p.images[path]
	if !ok {
		return lab.ImageInfo{}, fmt.Errorf("image %s: not there", path)
	}
	return info, nil
}

// TestAProviderOfItsOwn: the engine drives the shared steps over a
// provider declared here, with no edit to the engine, the steps or a mode:
// the NetworkManager snippet and the resolver drop-in are the provider's
// to keep (none is written on this machine), a node's image is read
// through it (its virtual size makes the clone's capacity; an image that
// is not qcow2 stops the storage step), and down asks it to remove them.
func TestAProviderOfItsOwn(t *testing.T) {
	ctx := context.Background()
	own := &ownProvider{Host: labtest.NewHost(), images: map[string]lab.ImageInfo{}, files: map[string]string{}, sizes: map[string]uint64{}}
	e, _ := labtest.Env(t, own.Host, "")
	e.Host = own
	p := e.Plan
	root := t.TempDir()
	p.Network.NMConfDir = filepath.Join(root, "NetworkManager", "conf.d")
	labtest.Must(t, os.Mkdir(filepath.Dir(p.Network.NMConfDir), 0o755))
	resolver := filepath.Join(root, "dnsmasq.d", "bmlab-fk.conf")
	p.Network.Resolver = &plan.Resolver{Kind: "dnsmasq", Path: resolver, Domain: p.Cluster.Domain, DNS: p.Network.NAT.HostAddress}
	p.Network.ResolverDropIns = []string{resolver}
	image := filepath.Join(root, "rhcos.qcow2")
	own.images[image] = lab.ImageInfo{Format: "qcow2", VirtualSize: 1 << 40}
	for i := range p.Nodes {
		p.Nodes[i].Disks[0].Backing = image
	}
	steps := []lab.Action{Preflight{}, Network{}, Storage{}, Nodes{}, BMCs{}}
	labtest.Must(t, lab.Up(ctx, e, steps, ""))

	snippet := filepath.Join(p.Network.NMConfDir, "90-bmlab-fk.conf")
	if d := cmp.Diff(map[string]string{snippet: "fk", resolver: "fk"}, own.files); d != "" {
		t.Errorf("the provider's files (-want +got):\n%s", d)
	}
	for _, dir := range []string{p.Network.NMConfDir, filepath.Dir(resolver)} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the steps made %s on this machine (%v): it is the provider's to make", dir, err)
		}
	}
	for _, w := range []string{"lab.Unmanaged", "lab.ResolverDropIn", "image " + image} {
		if !slices.Contains(own.asked, w) {
			t.Errorf("the steps did not ask the provider for %s: %q", w, own.asked)
		}
	}
	for v, size := range own.sizes {
		if size != 1<<40 {
			t.Errorf("volume %s: capacity %d, want the image's virtual size %d", v, size, uint64(1<<40))
		}
	}
	if len(own.sizes) == 0 {
		t.Error("no volume made")
	}
	if n := strings.Count(strings.Join(own.asked, "\n"), "image "+image); n != 1 {
		t.Errorf("the image was read %d times, want once (every node's disk clones it)", n)
	}
	if diffs, err := CheckNetwork(ctx, e); err != nil || len(diffs) != 0 {
		t.Errorf("check after up = %v, %v; want none", objects(diffs), err)
	}
	rm, err := RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if rm.Snippet != snippet || !slices.Equal(rm.ResolverDropIns, []string{resolver}) || len(own.files) != 0 {
		t.Errorf("remove = %+v, the provider keeps %v; want both files removed", rm, own.files)
	}

	// An image that is not qcow2 stops the storage step, in the lab
	// file's words.
	own.images[image] = lab.ImageInfo{Format: "raw", VirtualSize: 1 << 30}
	_, err = Storage{}.Ensure(ctx, e)
	if err == nil || !strings.Contains(err.Error(), "cluster.image "+image+" is raw, not qcow2") {
		t.Errorf("storage over a raw image = %v, want it refused", err)
	}
}
