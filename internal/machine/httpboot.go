package machine

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// UEFI HTTP boot (BootSourceOverrideTarget UefiHttp with Boot.HttpBootUri),
// the way Ironic's redfish-https boot interface uses it: the URI names an
// ISO, or a UEFI application (an iPXE, shim or GRUB .efi), as real BMCs
// take either. A VM cannot reach what the BMC's clients can (the host's
// loopback, say), so the BMC does the fetching: as a boot begins with a
// UefiHttp override, the image comes through the virtual media cache and
// goes into the CD drive, and the machine boots from it. An application is
// put there as the cache wraps it (package efiboot): an ISO whose El Torito
// EFI image is a FAT volume holding it as \EFI\BOOT\BOOTX64.EFI, which
// the firmware (OVMF) finds and runs itself, as it runs an application its
// own HTTP boot downloaded. What the BMC plays is the download, not the
// running. A file that is neither an ISO nor an application for the
// machine's architecture fails the boot, and so does a Legacy boot mode:
// HTTP boot is a UEFI boot. The Cd member then shows the URI as its image.
// The image stays for the boot it was fetched for (as firmware keeps an
// HTTP-booted image in a RAM disk) and is taken out at the next boot that
// does not use it, or at once when the override is cleared while the
// machine is off. A Continuous override fetches at every boot; the cache
// makes that a revalidation when the image is unchanged.

// Errors of a UefiHttp override: the first two are ErrInvalid, the last
// ErrConflict.
var (
	ErrNoHTTPBootURI  = fmt.Errorf("%w: a UefiHttp boot needs HttpBootUri", ErrInvalid)
	ErrBadHTTPBootURI = fmt.Errorf("%w: HttpBootUri must be an http or https URL", ErrInvalid)
	ErrHTTPBootLegacy = fmt.Errorf("%w: a UefiHttp boot is a UEFI boot, and the boot mode is Legacy; set BootSourceOverrideMode to UEFI", ErrConflict)
)

// httpBootArch is the architecture whose UEFI applications a machine
// boots.
func httpBootArch(m *Machine) string {
	if m.Inventory.Arch == "" {
		return "x86_64"
	}
	return m.Inventory.Arch
}

// checkHTTPBootURI validates an HttpBootUri: an absolute http(s) URL.
func checkHTTPBootURI(uri string) error {
	if len(uri) > MaxImageURI {
		return fmt.Errorf("%w: it is %d bytes long; at most %d are accepted", ErrBadHTTPBootURI, len(uri), MaxImageURI)
	}
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w, not %q", ErrBadHTTPBootURI, redact(uri))
	}
	return nil
}

// settleBoot makes what a boot begins with current: pending BIOS settings,
// then the image of a UefiHttp override. It returns the settings the boot
// runs with.
func (s *Service) settleBoot(ctx context.Context, m *Machine) (Settings, error) {
	st, err := s.settleBIOS(ctx, m)
	if err != nil {
		return st, err
	}
	return s.settleHTTPBoot(ctx, m, st, true)
}

// settleHTTPBoot puts the image of a UefiHttp override into the CD drive,
// or takes out an image an earlier UefiHttp boot put there once the
// override no longer asks for it. fetch false only takes out. Callers hold
// the machine's lock.
func (s *Service) settleHTTPBoot(ctx context.Context, m *Machine, st Settings, fetch bool) (Settings, error) {
	cur := *m
	cur.Settings = st
	md := MediaOf(&cur, SlotCD)
	want := st.Boot.Effective() == BootUefiHttp
	if !want {
		if !md.Inserted || !md.HTTPBoot {
			return st, nil
		}
		if err := s.be.SetMedia(ctx, m.ID, SlotCD, ""); err != nil {
			return st, fmt.Errorf("take the UefiHttp boot image out of %s: %w", m.Name, err)
		}
		st = withMedia(st, SlotCD, MediaSettings{}, "")
		return st, s.be.Save(ctx, m.ID, st)
	}
	if !fetch {
		return st, nil
	}
	uri := st.Boot.HTTPBootURI
	if err := checkHTTPBootURI(uri); err != nil {
		return st, err
	}
	if st.Boot.Mode == BootModeLegacy {
		// The mode may have become Legacy after the override was set
		// (the BIOS BootMode attribute).
		return st, fmt.Errorf("UefiHttp boot of %s: %w", m.Name, ErrHTTPBootLegacy)
	}
	if md.Inserted && !md.HTTPBoot {
		return st, fmt.Errorf("%w: a UefiHttp boot of %s needs the CD drive, and virtual media Cd holds %s; eject it first", ErrConflict, m.Name, redact(md.Image))
	}
	if s.tasks.fetcher == nil {
		return st, fmt.Errorf("%w: UefiHttp boot fetches through the image cache, and this service has none", ErrUnsupported)
	}
	fctx, cancel := context.WithTimeout(ctx, s.tasks.wait)
	defer cancel()
	req := ImageRequest{Machine: m.ID, Image: uri, VerifyCertificate: md.VerifyCertificate, ISO: true, EFIArch: httpBootArch(m), InUse: s.AttachedImages}
	for _, c := range md.Certificates {
		req.Certificates = append(req.Certificates, c.PEM)
	}
	img, release, err := s.tasks.fetcher.Fetch(fctx, req)
	if err != nil {
		return st, fmt.Errorf("UefiHttp boot of %s: %w", m.Name, err)
	}
	defer release()
	if md.Inserted && md.Path == img.Path {
		return st, nil // the image of the last boot, unchanged
	}
	rec := MediaSettings{Image: redact(uri), TransferProtocol: strings.ToUpper(strings.SplitN(uri, ":", 2)[0]), HTTPBoot: true}
	st = withMedia(st, SlotCD, rec, img.Path)
	recorded, err := s.recordAndAttach(ctx, m, SlotCD, st, img.Path)
	switch {
	case !recorded && err != nil:
		return st, fmt.Errorf("record the UefiHttp boot image of %s: %w", m.Name, err)
	case err != nil:
		return m.Settings, fmt.Errorf("attach the UefiHttp boot image to %s: %w", m.Name, err)
	}
	return st, nil
}
