package media

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/efiboot"
	"github.com/bmlab/bmlab/internal/machine"
)

// ProbeBytes is how much of an image a probe reads: enough for the ISO
// 9660 volume descriptor at byte 32769, a boot sector and a PE header.
const ProbeBytes = 64 << 10

// Probe checks an image as Fetch does, reading only its first ProbeBytes:
// the address policy, TLS trust and credentials are the same, the server
// must answer with the image (200, or 206 to the Range asked for), and the
// bytes read must be an image of the kind asked for (an ISO for the CD).
// The image is then "fetched" without the rest of the download: the
// result's Path is its URL (without credentials), which a simulated drive
// holds as its medium, and Size what the server says (-1 when it does not).
// A local image is checked in place, as Fetch does.
//
// It is how simulated machines take virtual media at scale (the sim's
// MediaProbe): a deploy through Ironic hands each machine an ISO of its
// own, and hundreds of full downloads would measure the disk, not the
// BMCs.
func (c *Cache) Probe(ctx context.Context, req machine.ImageRequest) (machine.FetchedImage, func(), error) {
	nop := func() {}
	_, image, user, pass, img, local, err := c.request(req)
	if err != nil || local {
		return img, nop, err
	}
	hc, err := c.client(req)
	if err != nil {
		return machine.FetchedImage{}, nop, fail(machine.MediaTLS, image, "%v", err)
	}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StallTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, image, nil)
	if err != nil {
		return machine.FetchedImage{}, nop, fail(machine.MediaForbidden, image, "%v", err)
	}
	hr.Header.Set("User-Agent", "bmlab-vbmcd")
	hr.Header.Set("Range", "bytes=0-"+strconv.Itoa(ProbeBytes-1))
	if user != "" {
		hr.SetBasicAuth(user, pass)
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return machine.FetchedImage{}, nop, c.classify(image, err, context.Cause(ctx))
	}
	defer resp.Body.Close()
	size := resp.ContentLength
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusPartialContent:
		size = -1
		if _, total, ok := strings.Cut(resp.Header.Get("Content-Range"), "/"); ok {
			if n, err := strconv.ParseInt(total, 10, 64); err == nil {
				size = n
			}
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return machine.FetchedImage{}, nop, fail(machine.MediaNotImage, image, "the image is empty")
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return machine.FetchedImage{}, nop, fail(machine.MediaNotFound, image, "the server answered %s", resp.Status)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return machine.FetchedImage{}, nop, fail(machine.MediaAuth, image, "the server answered %s", resp.Status)
	default:
		return machine.FetchedImage{}, nop, fail(machine.MediaFailed, image, "the server answered %s", resp.Status)
	}
	if req.MaxBytes > 0 && size > req.MaxBytes {
		return machine.FetchedImage{}, nop, fail(machine.MediaTooLarge, image, "the image is %d bytes, more than %d", size, req.MaxBytes)
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, ProbeBytes))
	if err != nil {
		return machine.FetchedImage{}, nop, fail(machine.MediaFailed, image, "the transfer was interrupted after %d bytes", len(head))
	}
	r := bytes.NewReader(head)
	if err := checkImageAt(r, req); err != nil {
		if !req.ISO || req.EFIArch == "" {
			return machine.FetchedImage{}, nop, fail(machine.MediaNotImage, image, "%v", err)
		}
		if aerr := efiboot.CheckApp(r, int64(len(head)), req.EFIArch); aerr != nil {
			return machine.FetchedImage{}, nop, fail(machine.MediaNotImage, image, "not an ISO 9660 image (no volume descriptor at byte 32769), and %v", aerr)
		}
	}
	if req.Progress != nil {
		req.Progress(int64(len(head)), size)
	}
	c.mu.Lock()
	c.probes++
	c.mu.Unlock()
	c.log.Debug("image probed", zap.String("image", image), zap.Int("read", len(head)), zap.Int64("size", size))
	return machine.FetchedImage{Path: image, Size: size}, nop, nil
}

// ProbeFor returns the image fetcher of a backend whose machines may take
// virtual media by probe (the sim's MediaProbe): images for the machines
// probe says are probed (Probe), the others fetched (Fetch). A firmware
// image (a Raw request) is always fetched: what it holds is the update.
func (c *Cache) ProbeFor(probe func(machineID string) bool) machine.ImageFetcher {
	return prober{c, probe}
}

type prober struct {
	c     *Cache
	probe func(string) bool
}

func (p prober) Fetch(ctx context.Context, req machine.ImageRequest) (machine.FetchedImage, func(), error) {
	if !req.Raw && req.Machine != "" && p.probe(req.Machine) {
		return p.c.Probe(ctx, req)
	}
	return p.c.Fetch(ctx, req)
}
