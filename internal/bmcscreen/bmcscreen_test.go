package bmcscreen

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

func TestParseSequence(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Item
		err  string
	}{
		{in: "root<Enter>", want: []Item{{Text: "root"}, {Key: "Enter"}}},
		{in: "<down><Down><ENTER>", want: []Item{{Key: "Down"}, {Key: "Down"}, {Key: "Enter"}}},
		{in: "<Ctrl-Alt-Del>", want: []Item{{Key: "Ctrl-Alt-Delete"}}},
		{in: "a<lt>b>c", want: []Item{{Text: "a<b>c"}}},
		{in: "x<f2>y", want: []Item{{Text: "x"}, {Key: "F2"}, {Text: "y"}}},
		{in: "<Hyper>", err: `unknown key "Hyper"`},
		{in: "a<b", err: "opens a key name that no"},
		{in: "", err: "nothing to type"},
		{in: "café", err: "cannot be typed"},
	} {
		got, err := ParseSequence(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSequence(%q): %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSequence(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseSequence(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestNormalize(t *testing.T) {
	if got := Normalize(" Boot\n  Manager\t"); got != "bootmanager" {
		t.Errorf("Normalize = %q", got)
	}
	// As OCR read OVMF's boot manager, and what was written.
	if a, b := Fold("UEFI QEMU DUD-ROM QMO0051"), Fold("uefi qemu DVD-ROM QM00051"); a != b {
		t.Errorf("Fold: %q and %q", a, b)
	}
}

// simBMC is vbmcd's Redfish service over n sim machines, on loopback.
func simBMC(t *testing.T, n int) (*sim.Backend, *machine.Service, string) {
	t.Helper()
	be := sim.New(n)
	svc := machine.NewService(be, nil)
	srv := httptest.NewServer(redfish.New(svc, nil, redfish.WithCredentials("admin", "pw")).Handler())
	t.Cleanup(srv.Close)
	return be, svc, srv.URL
}

// Over the sim's screen: keys typed through the BMC show on its screen,
// and WaitFor reads them there by OCR, with case and spaces not counting;
// a text that never comes ends at the deadline with the screen's text.
func TestWaitForOnSimScreen(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "tesseract")
	be, svc, url := simBMC(t, 1)
	m := be.List()[0]
	if err := svc.Reset(context.Background(), m.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	c, err := New(nil, url+"/redfish/v1/Systems/"+m.ID, "admin", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.Type(t.Context(), "Hello Lab<Enter>value=BMLAB42"); err != nil || n != 23 {
		t.Fatalf("Type: %d, %v", n, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	dir := filepath.Join(os.TempDir(), "bmcscreen-"+t.Name())
	f, err := c.WaitFor(ctx, "VALUE=bmlab42", WaitOptions{Every: 200 * time.Millisecond, Screen: func(png []byte, _ string) {
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, "last.png"), png, 0o644)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if f.Where != OnScreen || !strings.Contains(f.Text, "Hello Lab") {
		t.Errorf("found %+v", f)
	}
	t.Logf("found after %s, %d screens; the screen read:\n%s", f.After, f.Screens, f.Text)

	// Long enough for a few reads of the screen: one OCR takes about 1 s
	// (docs/performance.md), and a deadline shorter than one ended the
	// first read before it returned, leaving no screen text to report.
	short, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	_, err = c.WaitFor(short, "never shown", WaitOptions{Every: 200 * time.Millisecond})
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(nf.Screen, "Hello") {
		t.Errorf("a text never shown: %v", err)
	}
}

// Screens of real VMs, as the BMC gave them (TestE2EScreenFirmwareMenu's
// and TestE2EScreenTextUI's): OCR reads what a script waits for on them,
// compared as WaitFor compares.
var screens = []struct {
	file string
	want []string
}{
	{"ovmf-boot-manager.png", []string{"Boot Manager Menu", "UEFI QEMU DVD-ROM QM00051", "EFI Internal Shell", "Misc Device", "Esc=Exit"}},
	{"whiptail-menu.png", []string{"bmlab setup", "Choose a role", "alpha the first role", "bravo the second role", "charlie the third role", "Cancel"}},
}

func TestOCRScreens(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "tesseract")
	for _, s := range screens {
		b, err := os.ReadFile(filepath.Join("testdata", s.file))
		if err != nil {
			t.Fatal(err)
		}
		txt, err := OCRText(t.Context(), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range s.want {
			if !strings.Contains(Fold(txt), Fold(w)) {
				t.Errorf("%s: OCR did not read %q; it read:\n%s", s.file, w, txt)
			}
		}
	}
}

// BenchmarkOCR: OCR of one screen, as WaitFor runs it.
func BenchmarkOCR(b *testing.B) {
	testenv.Command(b, "tesseract")
	for _, s := range screens {
		png, err := os.ReadFile(filepath.Join("testdata", s.file))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(strings.TrimSuffix(s.file, ".png"), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := OCRText(context.Background(), png); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// At a deadline shorter than one OCR, the error says no screen was read,
// rather than showing an empty screen.
func TestNotFoundErrorSaysWhy(t *testing.T) {
	e := &NotFoundError{Text: "x", After: time.Second}
	if !strings.Contains(e.Error(), "no screenshot was read to the end") {
		t.Errorf("no screen read: %v", e)
	}
	e.Screens, e.Screen = 2, "Boot Manager"
	if !strings.Contains(e.Error(), "2 screenshots read") || !strings.Contains(e.Error(), "Boot Manager") {
		t.Errorf("screens read: %v", e)
	}
}
