package machine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
)

// MediaSlot is a virtual media member of a BMC.
type MediaSlot string

// Virtual media members.
const (
	// SlotCD is the CD/DVD drive every machine has (libvirt: a cdrom device
	// on the machine type's bus). Eject empties it and keeps the drive.
	SlotCD MediaSlot = "Cd"
	// SlotRemovable is a USB stick (or floppy) that appears when media is
	// inserted and goes away on eject, as a plugged-in stick does.
	SlotRemovable MediaSlot = "Removable"
)

// MediaSlots lists the members in the order BMCs show them.
var MediaSlots = []MediaSlot{SlotCD, SlotRemovable}

// MediaSettings is what a BMC keeps about one member beyond the drive's
// contents: trust settings for HTTPS images and where the inserted image came
// from. It is stored with the machine (Settings.Media); the image fields
// describe the drive only while the drive holds Path.
type MediaSettings struct {
	Slot MediaSlot
	// VerifyCertificate: HTTPS images are checked against Certificates, or
	// against the host's roots when there are none. On for a member that
	// has no settings yet; a client turns it off per member.
	VerifyCertificate bool
	Certificates      []Certificate

	Image            string // the URI as the client gave it
	Path             string // the local file attached to the drive
	UserName         string // never the password
	TransferProtocol string // HTTP, HTTPS, OEM (a local file)
	// HTTPBoot says a UefiHttp boot put the image there (fetched from the
	// override's HttpBootUri), not an insert.
	HTTPBoot bool
}

// Certificate is a PEM certificate trusted for a member's HTTPS images.
type Certificate struct {
	ID  string
	PEM string
}

func (ms MediaSettings) clone() MediaSettings {
	ms.Certificates = slices.Clone(ms.Certificates)
	return ms
}

// Media is the state of one member as a BMC reports it. It derives from the
// machine's drives: a drive that holds a file is inserted, whatever put it
// there.
type Media struct {
	MediaSettings
	// Drive is the drive behind the member; nil when it has none now (the
	// removable member with nothing plugged in).
	Drive    *Disk
	Inserted bool
	// Task is an insert in progress or the last one, when it failed or is
	// still running; nil otherwise.
	Task *Task
}

// driveFor finds the drive a member uses.
func driveFor(m *Machine, slot MediaSlot) *Disk {
	for i := range m.Disks {
		d := &m.Disks[i]
		switch slot {
		case SlotCD:
			if d.Device == DeviceCDROM {
				return d
			}
		case SlotRemovable:
			if d.Device == DeviceFloppy || d.Bus == "usb" {
				return d
			}
		}
	}
	return nil
}

// MediaOf derives a member's state from a machine snapshot, without tasks.
func MediaOf(m *Machine, slot MediaSlot) Media {
	md := Media{MediaSettings: MediaSettings{Slot: slot, VerifyCertificate: true}}
	for _, ms := range m.Settings.Media {
		if ms.Slot == slot {
			md.MediaSettings = ms.clone()
		}
	}
	d := driveFor(m, slot)
	md.Drive = d
	if d == nil || d.Source == "" {
		md.Image, md.Path, md.UserName, md.TransferProtocol, md.HTTPBoot = "", "", "", "", false
		return md
	}
	md.Inserted = true
	md.Image = redact(md.Image) // recorded by an older version with the password
	if md.Path != d.Source {
		// Someone else (virsh change-media, an operator) put this there: show
		// the file as it is.
		md.Image, md.Path, md.UserName, md.TransferProtocol, md.HTTPBoot = d.Source, d.Source, "", "OEM", false
	}
	return md
}

// ImageName is the last path element of an image URI.
func ImageName(image string) string {
	if image == "" {
		return ""
	}
	p := image
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	return path.Base(p)
}

// InsertRequest is an InsertMedia action (or a PATCH of Image).
type InsertRequest struct {
	Image            string
	UserName         string
	Password         string
	TransferProtocol string // optional; must match the URI's scheme
	TransferMethod   string // Stream or Upload; either way the image is copied
	WriteProtected   *bool  // nil: true
	Inserted         *bool  // nil: true
}

// Transfer protocol types (Redfish VirtualMedia.TransferProtocolType) the
// service accepts.
var TransferProtocols = []string{"HTTP", "HTTPS", "OEM"}

// TransferMethods are the Redfish transfer methods; the service always
// uploads (copies the image to the BMC) and reports Upload.
var TransferMethods = []string{"Stream", "Upload"}

// MediaErrorKind says why an image could not be fetched.
type MediaErrorKind string

// Reasons an insert fails.
const (
	MediaUnreachable MediaErrorKind = "unreachable" // connection refused, no route, DNS, timeout
	MediaNotFound    MediaErrorKind = "not-found"   // HTTP 404/410, no such local file
	MediaTLS         MediaErrorKind = "tls"         // certificate not trusted, handshake failed
	MediaAuth        MediaErrorKind = "auth"        // HTTP 401/403
	MediaNotImage    MediaErrorKind = "not-image"   // not an ISO 9660/UDF image (for the CD), nor a UEFI application where one is taken
	MediaNoSpace     MediaErrorKind = "no-space"    // the cache's disk is full, or the image exceeds the cache's bound
	MediaTooLarge    MediaErrorKind = "too-large"   // the image exceeds the request's MaxBytes
	MediaForbidden   MediaErrorKind = "forbidden"   // a local path outside the allowed directory, an unsupported scheme
	MediaDenied      MediaErrorKind = "denied"      // the image server's address is refused by the BMC's address policy
	MediaFailed      MediaErrorKind = "failed"      // anything else: interrupted transfer, HTTP 5xx
)

// MediaError is a failed fetch of an image; fetchers return it.
type MediaError struct {
	Kind  MediaErrorKind
	Image string // the URI, without credentials
	Err   error
}

func (e *MediaError) Error() string { return fmt.Sprintf("image %s: %v", e.Image, e.Err) }
func (e *MediaError) Unwrap() error { return e.Err }

// ImageRequest asks a fetcher for an image.
type ImageRequest struct {
	// Machine is the ID of the machine the image is for ("" when none):
	// a fetcher may treat machines differently (the sim's probe mode).
	Machine string
	// Source, when valid, is the address the image is fetched from: the
	// machine's BMC's own (WithMediaSource), as a real BMC fetches from
	// its management address, so it reaches only what that network
	// routes to.
	Source            netip.Addr
	Image             string
	UserName          string
	Password          string
	VerifyCertificate bool
	Certificates      []string // PEM
	// ISO asks for a check that the image is an ISO 9660 (or UDF) image.
	ISO bool
	// EFIArch, with ISO, also takes a UEFI application for a machine of
	// this architecture (x86_64, aarch64): a PE32+ image, as an iPXE or
	// shim .efi is. The fetcher delivers it wrapped in an ISO whose El
	// Torito EFI boot image holds it at the UEFI default path, which the
	// firmware boots (package efiboot). Anything else is MediaNotImage.
	EFIArch string
	// Raw takes any content (a firmware image, which its user checks);
	// otherwise the image must be one a drive can hold.
	Raw bool
	// MaxBytes, when set, refuses a larger image (MediaTooLarge) before
	// more than that is stored.
	MaxBytes int64
	// InUse lists the local files some machine's drive holds now; a cache
	// must not evict them. It is called when eviction is decided, not when
	// the request starts, so an image attached meanwhile is held.
	InUse func() []string
	// Progress, when set, is called as bytes arrive (total -1 when unknown).
	Progress func(done, total int64)
}

// FetchedImage is an image on local disk, readable by the hypervisor.
type FetchedImage struct {
	Path   string
	Size   int64
	SHA256 string // empty for local files used in place
}

// ImageFetcher makes images local files a hypervisor can read. Fetch returns
// only a complete, checked file; release lets the fetcher evict it again
// once the caller has attached it (or given up). Errors are *MediaError.
type ImageFetcher interface {
	Fetch(ctx context.Context, req ImageRequest) (img FetchedImage, release func(), err error)
}

// mediaTarget checks that a machine can hold media in slot. A machine
// without a CD-ROM drive takes an insert while it is off: a BMC always has
// its virtual drive, and the backend adds one when it attaches the image.
// A running one cannot get a drive (IDE and SATA do not hot-plug).
func mediaTarget(m *Machine, slot MediaSlot) error {
	switch slot {
	case SlotCD:
		if driveFor(m, SlotCD) == nil && m.Power != PowerOff {
			return fmt.Errorf("%w: %s has no CD-ROM drive, and a drive cannot be plugged into a running machine (IDE and SATA do not hot-plug); power it off and insert again: vbmcd then adds one, as a BMC always has its virtual drive", ErrUnsupported, m.Name)
		}
	case SlotRemovable:
	default:
		return fmt.Errorf("%w: no virtual media %q", ErrNotFound, slot)
	}
	return nil
}

// IsMediaError reports whether err is a fetch failure and returns it.
func IsMediaError(err error) (*MediaError, bool) {
	var me *MediaError
	ok := errors.As(err, &me)
	return me, ok
}
