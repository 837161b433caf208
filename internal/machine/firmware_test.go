package machine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// checkParsed checks what a firmware parse (of what) gave against what it
// should: the component and version, or, when wantErr is not empty, an
// error that says wantErr.
func checkParsed(t *testing.T, what string, c machine.FirmwareComponent, v string, err error, wantC machine.FirmwareComponent, wantV, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: error %v, want one that says %q", what, err, wantErr)
		}
		return
	}
	if err != nil || c != wantC || v != wantV {
		t.Errorf("%s: %q %q %v, want %q %q", what, c, v, err, wantC, wantV)
	}
}

func TestParseFirmwareName(t *testing.T) {
	for _, tc := range []struct {
		name      string
		component machine.FirmwareComponent
		version   string
		err       string
	}{
		{"bios-2.3.1.bin", machine.FirmwareBIOS, "2.3.1", ""},
		{"BIOS_2.3.1.bin", machine.FirmwareBIOS, "2.3.1", ""},
		{"bmc-10.0", machine.FirmwareBMC, "10.0", ""},
		{"nic-4.1.2.tar.gz", machine.FirmwareNIC, "4.1.2", ""},
		{"Nic-7", machine.FirmwareNIC, "7", ""},
		{"cpld-1.0.bin", "", "", "names the component \"cpld\""},
		{"bios.bin", "", "", "does not say what the image is for"},
		{"bios-latest.bin", "", "", "has no version"},
		{"bios-2.3.1rc1.bin", "", "", "has no version"},
		{"bios-2.3.1.", "", "", "has no version"},
		{"bios-.bin", "", "", "has no version"},
	} {
		c, v, err := machine.ParseFirmwareName(tc.name)
		checkParsed(t, tc.name, c, v, err, tc.component, tc.version, tc.err)
	}
}

func TestParseFirmwareImageManifestWinsOverName(t *testing.T) {
	manifest := func(line string) []byte {
		return []byte(machine.FirmwareManifestMagic + "\n" + line + "\npayload\x00\x01")
	}
	for _, tc := range []struct {
		what      string
		name      string
		head      []byte
		component machine.FirmwareComponent
		version   string
		err       string
	}{
		{"manifest", "firmware.bin", manifest(`{"Component":"BMC","Version":"3.2"}`), machine.FirmwareBMC, "3.2", ""},
		{"manifest over name", "bios-9.9.bin", manifest(`{"Component":"nic","Version":"1.4.0"}`), machine.FirmwareNIC, "1.4.0", ""},
		{"manifest with CRLF", "x", []byte(machine.FirmwareManifestMagic + "\r\n{\"Component\":\"BIOS\",\"Version\":\"2.0\"}\r\n"), machine.FirmwareBIOS, "2.0", ""},
		{"no manifest: the name", "bios-2.3.1.bin", []byte("\x7fELF binary"), machine.FirmwareBIOS, "2.3.1", ""},
		{"empty image: the name", "bmc-1.1.bin", nil, machine.FirmwareBMC, "1.1", ""},
		{"unknown component", "bios-1.bin", manifest(`{"Component":"RAID","Version":"1.0"}`), "", "", "names the component \"RAID\""},
		{"bad version", "bios-1.bin", manifest(`{"Component":"BIOS","Version":"2.x"}`), "", "", "gives the version \"2.x\""},
		{"not JSON", "bios-1.bin", manifest(`Component: BIOS`), "", "", "is not one line of JSON"},
		{"unknown field", "bios-1.bin", manifest(`{"Component":"BIOS","Version":"2","Signed":true}`), "", "", "is not one line of JSON"},
	} {
		c, v, err := machine.ParseFirmwareImage(tc.name, tc.head)
		checkParsed(t, tc.what, c, v, err, tc.component, tc.version, tc.err)
	}
	if _, _, err := machine.ParseFirmwareImage("x", manifest(`{"Component":"RAID","Version":"1"}`)); !errors.Is(err, machine.ErrUnknownComponent) {
		t.Errorf("an unknown component is %v, want ErrUnknownComponent", err)
	}
}

func TestImageChecksum(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		uri, image, sum, err string
	}{
		{"http://h/bios-1.bin", "http://h/bios-1.bin", "", ""},
		{"http://h/bios-1.bin#sha256=" + sum, "http://h/bios-1.bin", sum, ""},
		{"http://h/bios-1.bin#SHA256=" + strings.ToUpper(sum), "http://h/bios-1.bin", sum, ""},
		{"http://h/bios-1.bin#md5=00", "", "", "is not a checksum"},
		{"http://h/bios-1.bin#sha256=abc", "", "", "is not 64 hex digits"},
		{"http://h/bios-1.bin#sha256=" + strings.Repeat("zz", 32), "", "", "is not 64 hex digits"},
	} {
		image, got, err := machine.SplitImageChecksum(tc.uri)
		if tc.err != "" {
			if !errors.Is(err, machine.ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want ErrInvalid saying %q", tc.uri, err, tc.err)
			}
			continue
		}
		if err != nil || image != tc.image || got != tc.sum {
			t.Errorf("%s: %q %q %v, want %q %q", tc.uri, image, got, err, tc.image, tc.sum)
		}
	}

	good := machine.FetchedImage{Size: 10, SHA256: sum}
	for _, tc := range []struct {
		img  machine.FetchedImage
		want string
		err  string
	}{
		{good, "", ""},
		{good, sum, ""},
		{good, strings.Repeat("cd", 32), "not " + strings.Repeat("cd", 32)},
		{machine.FetchedImage{}, "", "empty"},
		{machine.FetchedImage{Size: machine.MaxFirmwareBytes + 1, SHA256: sum}, "", "at most"},
	} {
		err := machine.CheckFirmwareImage(tc.img, tc.want)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("check %+v against %q: %v, want %q", tc.img, tc.want, err, tc.err)
		}
	}
}

// fileFetcher serves images from a map of URI to content, as the image
// cache would: the file, its size and SHA-256.
type fileFetcher struct {
	dir    string
	images map[string][]byte
}

func (f *fileFetcher) Fetch(_ context.Context, req machine.ImageRequest) (machine.FetchedImage, func(), error) {
	b, ok := f.images[req.Image]
	if !ok {
		return machine.FetchedImage{}, func() {}, &machine.MediaError{Kind: machine.MediaNotFound, Image: req.Image, Err: errors.New("the server answered 404 Not Found")}
	}
	if !req.Raw || req.MaxBytes != machine.MaxFirmwareBytes {
		return machine.FetchedImage{}, func() {}, errors.New("a firmware image must be fetched raw with the firmware bound")
	}
	p := filepath.Join(f.dir, machine.ImageName(req.Image))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return machine.FetchedImage{}, func() {}, err
	}
	s := sha256.Sum256(b)
	return machine.FetchedImage{Path: p, Size: int64(len(b)), SHA256: hex.EncodeToString(s[:])}, func() {}, nil
}

func waitTask(t *testing.T, task *machine.Task, awaiting bool) machine.TaskStatus {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		st := task.Status()
		if st.State != machine.TaskRunning || (awaiting && st.Awaiting) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("task %s still running: %+v", task.ID, task.Status())
	return machine.TaskStatus{}
}

func TestFirmwareUpdates(t *testing.T) {
	ctx := context.Background()
	bios := []byte("bios payload")
	sum := sha256.Sum256(bios)
	ff := &fileFetcher{dir: t.TempDir(), images: map[string][]byte{
		"http://img/bios-2.3.1.bin": bios,
		"http://img/bmc-5.0.bin":    []byte("bmc payload"),
		"http://img/cpld-1.0.bin":   []byte("cpld"),
	}}
	be := sim.New(1)
	svc := machine.NewService(be, nil, machine.WithImageFetcher(ff), machine.WithBMCUpdateDowntime(200*time.Millisecond))
	id := be.List()[0].ID
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}

	// A BIOS update is staged: the old version shows until the reset.
	task, err := svc.UpdateFirmware(ctx, id, machine.UpdateRequest{Image: "http://img/bios-2.3.1.bin#sha256=" + hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitTask(t, task, true); st.State != machine.TaskRunning || !st.Awaiting || st.Version != "2.3.1" || st.Component != machine.FirmwareBIOS {
		t.Fatalf("a checked BIOS image: %+v, want Running and awaiting the reset", st)
	}
	m, _ := svc.Get(id)
	if v := m.Settings.FirmwareVersion(machine.FirmwareBIOS); v != machine.FactoryFirmware {
		t.Errorf("BIOS %s before the reset, want %s", v, machine.FactoryFirmware)
	}
	if err := svc.Reset(ctx, id, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	if st := task.Status(); st.State != machine.TaskCompleted {
		t.Errorf("after the reset the task is %+v, want Completed", st)
	}
	m, _ = svc.Get(id)
	if v := m.Settings.FirmwareVersion(machine.FirmwareBIOS); v != "2.3.1" || len(m.Settings.FirmwarePending) != 0 {
		t.Errorf("after the reset BIOS %s pending %v, want 2.3.1 and none", v, m.Settings.FirmwarePending)
	}

	// Failures end in Exception, each with the step that failed.
	for _, tc := range []struct {
		req  machine.UpdateRequest
		kind machine.FirmwareErrorKind
	}{
		{machine.UpdateRequest{Image: "http://img/bios-9.bin"}, machine.FirmwareTransfer},
		{machine.UpdateRequest{Image: "http://img/bios-2.3.1.bin#sha256=" + strings.Repeat("00", 32)}, machine.FirmwareVerify},
		{machine.UpdateRequest{Image: "http://img/cpld-1.0.bin"}, machine.FirmwareTarget},
		{machine.UpdateRequest{Image: "http://img/bios-2.3.1.bin", Component: machine.FirmwareBMC}, machine.FirmwareTarget},
	} {
		task, err := svc.UpdateFirmware(ctx, id, tc.req)
		if err != nil {
			t.Fatalf("%+v: %v", tc.req, err)
		}
		st := waitTask(t, task, false)
		fe, ok := machine.IsFirmwareError(st.Err)
		if st.State != machine.TaskException || !ok || fe.Kind != tc.kind {
			t.Errorf("%+v: %+v, want Exception at step %s", tc.req, st, tc.kind)
		}
	}
	for _, img := range []string{"ftp://img/bios-1.bin", "http://img/bios-1.bin#md5=1", "/local/bios-1.bin"} {
		if _, err := svc.UpdateFirmware(ctx, id, machine.UpdateRequest{Image: img}); !errors.Is(err, machine.ErrInvalid) {
			t.Errorf("image %s: %v, want ErrInvalid at once", img, err)
		}
	}

	// A BMC update applies at once and takes the BMC down for a while.
	before := time.Now()
	task, err = svc.UpdateFirmware(ctx, id, machine.UpdateRequest{Image: "http://img/bmc-5.0.bin", Component: machine.FirmwareBMC})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitTask(t, task, false); st.State != machine.TaskCompleted {
		t.Fatalf("BMC update: %+v", st)
	}
	// The window is read, not raced: under load the test may look after
	// it has passed.
	until := svc.Faults()[id].DownUntil
	if d := until.Sub(before); until.IsZero() || d < 200*time.Millisecond || time.Until(until) > 200*time.Millisecond {
		t.Errorf("the BMC's update took it down until %v (%v after the request), want a 200 ms window from the update", until, d)
	}
	if in := svc.RedfishFault(id); time.Now().Before(until.Add(-20*time.Millisecond)) && !in.Down {
		t.Errorf("the BMC answers within its down window")
	}
	// The window is 200 ms: the BMC answers again once it has passed.
	if !testenv.WaitFor(5*time.Second, func() bool { return !svc.RedfishFault(id).Down }) {
		t.Errorf("the BMC is still down 5 s after its 200 ms window")
	}
	m, _ = svc.Get(id)
	if v := m.Settings.FirmwareVersion(machine.FirmwareBMC); v != "5.0" {
		t.Errorf("BMC %s after its update, want 5.0", v)
	}
}
