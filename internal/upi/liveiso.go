package upi

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// BootstrapInPlaceIgnition is the config `create
// single-node-ignition-config` writes for the live ISO.
const BootstrapInPlaceIgnition = "bootstrap-in-place-for-live-iso.ign"

// The live ISO's embedded ignition, as coreos-installer's `iso ignition
// embed` leaves it: the ISO's bootloader loads /images/ignition.img as an
// extra initramfs, a compressed newc cpio archive whose config.ign Ignition
// reads in the live system.
const (
	ISOIgnitionImage = "/images/ignition.img"
	ISOIgnitionFile  = "config.ign"
)

// EmbedIgnition writes out: the live ISO with ign embedded as
// /images/ignition.img (a gzip-compressed newc cpio holding config.ign),
// its boot records kept. It does with xorriso what coreos-installer
// does in the ISO's reserved embed area, so an ISO without that area (or
// without coreos-installer on the host) takes one too; the kernel
// unpacks either archive the same way.
func EmbedIgnition(ctx context.Context, liveISO string, ign []byte, out string) error {
	if _, err := os.Stat(liveISO); err != nil {
		return err // xorriso would start a new, empty image
	}
	img, err := ignitionArchive(ign)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".embed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	imgPath := filepath.Join(tmp, "ignition.img")
	if err := os.WriteFile(imgPath, img, 0o600); err != nil {
		return err
	}
	// The new session keeps the volume's date: it is the filesystem UUID
	// a bootloader may search its root by (grub-mkrescue's images do).
	info, err := exec.CommandContext(ctx, "xorriso", "-indev", liveISO, "-pvd_info").CombinedOutput()
	if err != nil {
		return fmt.Errorf("read %s (xorriso -pvd_info): %w\n%s", liveISO, err, lastLines(string(info), 5))
	}
	date := ""
	for _, l := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "Modif. Time" {
			date = strings.TrimSpace(v)
		}
	}
	part := filepath.Join(tmp, "out.iso")
	args := []string{"-abort_on", "FAILURE", "-indev", liveISO, "-outdev", part, "-boot_image", "any", "keep"}
	if date != "" {
		args = append(args, "-volume_date", "uuid", date)
	}
	cmd := exec.CommandContext(ctx, "xorriso", append(args, "-map", imgPath, ISOIgnitionImage)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("embed the ignition into %s (xorriso): %w\n%s", liveISO, err, lastLines(string(b), 5))
	}
	if err := os.Chmod(part, 0o644); err != nil {
		return err
	}
	return os.Rename(part, out)
}

// EmbeddedIgnition reads the ignition EmbedIgnition (or coreos-installer,
// when its archive is gzip) put into an ISO; nil when it has none.
func EmbeddedIgnition(ctx context.Context, iso string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "bmlab-iso-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	img := filepath.Join(tmp, "ignition.img")
	b, err := exec.CommandContext(ctx, "xorriso", "-osirrox", "on", "-indev", iso, "-extract", ISOIgnitionImage, img).CombinedOutput()
	if _, serr := os.Stat(img); serr != nil {
		if err == nil || strings.Contains(string(b), "Cannot determine attributes of (ISO) source file") {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s from %s (xorriso): %w\n%s", ISOIgnitionImage, iso, err, lastLines(string(b), 5))
	}
	raw, err := os.ReadFile(img)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", ISOIgnitionImage, iso, err)
	}
	files, err := readCpio(zr)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", ISOIgnitionImage, iso, err)
	}
	return files[ISOIgnitionFile], nil
}

// ignitionArchive is config.ign in a gzip-compressed newc cpio archive.
func ignitionArchive(ign []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	writeCpio(zw, 1, 0o100644, ISOIgnitionFile, ign)
	writeCpio(zw, 0, 0, "TRAILER!!!", nil)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeCpio writes one newc entry: the "070701" header of thirteen 8-digit
// hex fields, the NUL-terminated name and the data, each padded to 4 bytes
// (the kernel's initramfs format, Documentation/driver-api/early-userspace/buffer-format.rst).
func writeCpio(w io.Writer, ino, mode int, name string, data []byte) {
	fields := []int{ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0}
	var h strings.Builder
	h.WriteString("070701")
	for _, f := range fields {
		fmt.Fprintf(&h, "%08x", f)
	}
	h.WriteString(name)
	h.WriteByte(0)
	for h.Len()%4 != 0 {
		h.WriteByte(0)
	}
	io.WriteString(w, h.String())
	w.Write(data)
	w.Write(make([]byte, (4-len(data)%4)%4))
}

// readCpio reads a newc archive's regular files by name.
func readCpio(r io.Reader) (map[string][]byte, error) {
	out := map[string][]byte{}
	for {
		h := make([]byte, 110)
		if _, err := io.ReadFull(r, h); err != nil {
			return nil, fmt.Errorf("cpio header: %w", err)
		}
		if string(h[:6]) != "070701" {
			return nil, fmt.Errorf("cpio: magic %q, want 070701 (newc)", h[:6])
		}
		field := func(i int) (int, error) {
			v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
			return int(v), err
		}
		size, err1 := field(6)
		nameSize, err2 := field(11)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("cpio header: %w", err)
		}
		name := make([]byte, nameSize+(4-(110+nameSize)%4)%4)
		if _, err := io.ReadFull(r, name); err != nil {
			return nil, fmt.Errorf("cpio name: %w", err)
		}
		n := strings.TrimRight(string(name[:nameSize]), "\x00")
		if n == "TRAILER!!!" {
			return out, nil
		}
		data := make([]byte, size+(4-size%4)%4)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("cpio %s: %w", n, err)
		}
		out[n] = data[:size]
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
