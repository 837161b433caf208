package machine

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Firmware of a machine, as a BMC's update service keeps it: a version per
// component (the BIOS, the BMC itself, the NICs), changed by images a client
// names (Redfish SimpleUpdate). What an image holds beyond its manifest
// means nothing to the VM; the versions are what Ironic and Metal3 read and
// compare.
//
// The image says what it is for and which version it brings: a manifest at
// its start, else its file name (see ParseFirmwareImage). It is fetched
// through the image cache, checked (size, an optional SHA-256 given in the
// URI's fragment), then applied as on real servers: a BIOS or NIC update at
// the machine's next reset, a BMC update at once, after which the BMC
// reboots and answers nothing for a while (WithBMCUpdateDowntime).

// FirmwareComponent is a piece of firmware a machine's BMC can update.
type FirmwareComponent string

// Firmware components.
const (
	FirmwareBIOS FirmwareComponent = "BIOS"
	FirmwareBMC  FirmwareComponent = "BMC"
	// FirmwareNIC is the firmware of the machine's network adapters, one
	// version for all of them (a server's NICs are one model).
	FirmwareNIC FirmwareComponent = "NIC"
)

// FirmwareComponents lists the components, in the order inventories show
// them.
var FirmwareComponents = []FirmwareComponent{FirmwareBIOS, FirmwareBMC, FirmwareNIC}

// FactoryFirmware is the version of every component a machine has never
// had updated.
const FactoryFirmware = "1.0.0"

// Bounds of firmware images.
const (
	// MaxFirmwareBytes bounds an image: real BIOS and BMC images are 16 to
	// 64 MiB.
	MaxFirmwareBytes = 64 << 20
	// maxManifest bounds the manifest line at an image's start.
	maxManifest = 4096
)

// FirmwareManifestMagic starts an image that carries a manifest: this
// line, then one line of JSON, {"Component": "BIOS", "Version": "2.3.1"}.
const FirmwareManifestMagic = "BMLAB-FIRMWARE 1"

// FirmwareVersion returns the version of a component: the updated one, or
// FactoryFirmware.
func (s Settings) FirmwareVersion(c FirmwareComponent) string {
	if v := s.Firmware[c]; v != "" {
		return v
	}
	return FactoryFirmware
}

// ErrUnknownComponent marks an image for a component this BMC does not
// have.
var ErrUnknownComponent = fmt.Errorf("this BMC updates %s, %s and %s firmware only", FirmwareBIOS, FirmwareBMC, FirmwareNIC)

// versionRe is a version: numbers joined by dots.
var versionRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*`)

// extRe is what may follow the version in a file name: extensions that
// start with a letter (.bin, .tar.gz).
var extRe = regexp.MustCompile(`^(\.[A-Za-z][A-Za-z0-9]*)*$`)

// ParseFirmwareName reads a component and version from an image's file
// name: COMPONENT-VERSION[.EXT...] (or with _), the component one of BIOS,
// BMC, NIC in any case, the version numbers joined by dots:
// bios-2.3.1.bin is BIOS 2.3.1.
func ParseFirmwareName(name string) (FirmwareComponent, string, error) {
	i := strings.IndexAny(name, "-_")
	if i < 0 {
		return "", "", fmt.Errorf("the file name %q does not say what the image is for: name it COMPONENT-VERSION.bin (bios-2.3.1.bin) or give it a manifest", name)
	}
	c, ok := firmwareComponent(name[:i])
	if !ok {
		return "", "", fmt.Errorf("the file name %q names the component %q: %w", name, name[:i], ErrUnknownComponent)
	}
	rest := name[i+1:]
	v := versionRe.FindString(rest)
	if v == "" || !extRe.MatchString(rest[len(v):]) {
		return "", "", fmt.Errorf("the file name %q has no version after %q: want numbers joined by dots (2.3.1), then extensions", name, name[:i+1])
	}
	return c, v, nil
}

func firmwareComponent(s string) (FirmwareComponent, bool) {
	for _, c := range FirmwareComponents {
		if strings.EqualFold(s, string(c)) {
			return c, true
		}
	}
	return "", false
}

// ParseFirmwareImage tells what an image is for and which version it
// brings. An image whose first line is FirmwareManifestMagic says it in the
// JSON line that follows ({"Component": "BIOS", "Version": "2.3.1"}); any
// other image by its file name (ParseFirmwareName). head is the image's
// start (at least the first 4 KiB, or all of a smaller image).
func ParseFirmwareImage(name string, head []byte) (FirmwareComponent, string, error) {
	r := bufio.NewReader(io.LimitReader(bytes.NewReader(head), maxManifest))
	first, err := r.ReadString('\n')
	if err != nil || strings.TrimRight(first, "\r\n") != FirmwareManifestMagic {
		return ParseFirmwareName(name)
	}
	line, err := r.ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", "", fmt.Errorf("the image's manifest: %w", err)
	}
	var mf struct{ Component, Version string }
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(&mf); err != nil {
		return "", "", fmt.Errorf("the image's manifest is not one line of JSON with Component and Version (within %d bytes): %v", maxManifest, err)
	}
	c, ok := firmwareComponent(mf.Component)
	if !ok {
		return "", "", fmt.Errorf("the image's manifest names the component %q: %w", mf.Component, ErrUnknownComponent)
	}
	if v := versionRe.FindString(mf.Version); v == "" || v != mf.Version {
		return "", "", fmt.Errorf("the image's manifest gives the version %q: want numbers joined by dots (2.3.1)", mf.Version)
	}
	return c, mf.Version, nil
}

// SplitImageChecksum takes the expected SHA-256 from an image URI's
// fragment (#sha256=HEX) and returns the URI without it. A fragment is
// never sent to the image server, so any client can give a checksum this
// way. A URI without a fragment has no checksum ("").
func SplitImageChecksum(uri string) (image, sum string, err error) {
	base, frag, ok := strings.Cut(uri, "#")
	if !ok {
		return uri, "", nil
	}
	if f, uerr := url.PathUnescape(frag); uerr == nil {
		frag = f
	}
	alg, v, _ := strings.Cut(frag, "=")
	if !strings.EqualFold(alg, "sha256") {
		return "", "", invalidf("the image URI's fragment %q is not a checksum: give sha256=HEX or none", frag)
	}
	b, herr := hex.DecodeString(v)
	if herr != nil || len(b) != 32 {
		return "", "", invalidf("the image URI's sha256 %q is not 64 hex digits", v)
	}
	return base, hex.EncodeToString(b), nil
}

// CheckFirmwareImage checks a fetched image against the bounds and the
// expected checksum (none when want is "").
func CheckFirmwareImage(img FetchedImage, want string) error {
	switch {
	case img.Size == 0:
		return errors.New("the image is empty")
	case img.Size > MaxFirmwareBytes:
		return fmt.Errorf("the image is %d bytes; firmware images are at most %d", img.Size, MaxFirmwareBytes)
	case want != "" && img.SHA256 != want:
		return fmt.Errorf("the image's SHA-256 is %s, not %s as its URI says: a corrupt or other image", img.SHA256, want)
	}
	return nil
}

// readHead returns the first maxManifest bytes of a file.
func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, maxManifest)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// applyFirmware makes pending firmware current in st; it reports whether
// there was any.
func applyFirmware(st *Settings) bool {
	if len(st.FirmwarePending) == 0 {
		return false
	}
	if st.Firmware == nil {
		st.Firmware = map[FirmwareComponent]string{}
	}
	maps.Copy(st.Firmware, st.FirmwarePending)
	st.FirmwarePending = nil
	return true
}

// FirmwareErrorKind says at which step a firmware update failed.
type FirmwareErrorKind string

// Steps a firmware update fails at.
const (
	// FirmwareTransfer: the image could not be fetched (the error wraps
	// the fetcher's *MediaError).
	FirmwareTransfer FirmwareErrorKind = "transfer"
	// FirmwareVerify: the image is not what was asked for (size,
	// checksum, an unreadable manifest or name).
	FirmwareVerify FirmwareErrorKind = "verify"
	// FirmwareTarget: the image is for a component the target does not
	// have, or one this BMC does not update.
	FirmwareTarget FirmwareErrorKind = "target"
	// FirmwareApply: storing the new version failed.
	FirmwareApply FirmwareErrorKind = "apply"
)

// FirmwareError is why a firmware update ended in Exception.
type FirmwareError struct {
	Kind FirmwareErrorKind
	Err  error
}

func (e *FirmwareError) Error() string { return e.Err.Error() }
func (e *FirmwareError) Unwrap() error { return e.Err }

// IsFirmwareError reports whether err is a failed firmware update and
// returns it.
func IsFirmwareError(err error) (*FirmwareError, bool) {
	var fe *FirmwareError
	ok := errors.As(err, &fe)
	return fe, ok
}

// firmwareTarget checks that an image's component fits the target the
// client named ("" names the machine: any component).
func firmwareTarget(target, image FirmwareComponent) error {
	if target != "" && target != image {
		return fmt.Errorf("the image is %s firmware and the target is the %s: a wrong target", image, target)
	}
	if !slices.Contains(FirmwareComponents, image) {
		return fmt.Errorf("this BMC does not update %s firmware", image)
	}
	return nil
}
