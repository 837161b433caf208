package modes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestBrokenLabsRefusedBeforeAnything: every broken lab file is refused,
// at load or in preflight, with the lab file's field in the message, and
// nothing is created; the valid control gets past preflight.
func TestBrokenLabsRefusedBeforeAnything(t *testing.T) {
	for _, l := range testenv.BrokenLabs(t) {
		t.Run(l.Name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "lab")
			labtest.Must(t, os.MkdirAll(dir, 0o755))
			for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
				_ = os.Chmod(d, 0o755)
			}
			cfg := l.Write(t, dir)
			p, err := plan.Load(plan.Options{Modes: All.Specs(), ConfigPath: cfg, ConfigSet: true, Mode: l.Mode, Profile: "tiny"})
			f := libvirtChecks{labtest.NewHost()}
			if err == nil {
				rec := &labtest.Recorder{}
				m, merr := All.Lookup(l.Mode)
				labtest.Must(t, merr)
				err = lab.Up(context.Background(), &lab.Env{Plan: p, Host: f, Rep: rec}, m.Actions(), "storage")
			}
			if l.Want == "" {
				if err != nil {
					t.Fatalf("the valid control was refused: %v", err)
				}
				if len(f.Objs[lab.KindPool]) == 0 {
					t.Fatalf("the valid control created no pool: the test could not tell")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), l.Want) {
				t.Fatalf("got %v\nwant an error containing %q", err, l.Want)
			}
			for kind, objs := range f.Objs {
				if len(objs) > 0 {
					t.Errorf("%ss created before the error: %v", kind, objs)
				}
			}
			t.Logf("%s", err)
		})
	}
}

// libvirtChecks is the fake provider with the libvirt provider's own
// check of what it would be given.
type libvirtChecks struct{ *labtest.Host }

func (libvirtChecks) Validate(o lab.Object) error { return labvirt.Validate(o) }
