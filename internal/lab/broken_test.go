package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
			must(t, os.MkdirAll(dir, 0o755))
			for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
				_ = os.Chmod(d, 0o755)
			}
			cfg := l.Write(t, dir)
			p, err := plan.Load(plan.Options{ConfigPath: cfg, ConfigSet: true, Mode: l.Mode, Profile: "tiny"})
			f := newFake()
			if err == nil {
				rec := &recorder{}
				actions, perr := Pipeline(l.Mode)
				must(t, perr)
				err = Up(context.Background(), &Env{Plan: p, Host: f, Rep: rec}, actions, "storage")
			}
			if l.Want == "" {
				if err != nil {
					t.Fatalf("the valid control was refused: %v", err)
				}
				if len(f.objs[KindPool]) == 0 {
					t.Fatalf("the valid control created no pool: the test could not tell")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), l.Want) {
				t.Fatalf("got %v\nwant an error containing %q", err, l.Want)
			}
			for kind, objs := range f.objs {
				if len(objs) > 0 {
					t.Errorf("%ss created before the error: %v", kind, objs)
				}
			}
			t.Logf("%s", err)
		})
	}
}
