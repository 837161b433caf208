package rfb

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"io"
	"strconv"
	"sync"
	"time"
)

// Bounds on what a server may announce: a screen larger than this, a name
// or a cut text longer, is refused rather than allocated.
const (
	maxSide     = 8192
	maxName     = 4096
	maxCutText  = 1 << 20
	maxRects    = 1 << 16
	versionLen  = 12
	maxReason   = 4096
	msgSetPF    = 0
	msgSetEnc   = 2
	msgFBUReq   = 3
	msgKeyEvent = 4

	encRaw         int32 = 0
	encDesktopSize int32 = -223 // RFC 6143 §7.8.2
)

// Client is one RFB client session on a display: the handshake done, the
// pixel format set to 32-bit true colour. It is not safe for concurrent
// use; open one per task (a screenshot, a sequence of keys).
type Client struct {
	c      io.ReadWriteCloser
	br     *bufio.Reader
	Width  int
	Height int
	// Name is the desktop name the server announced.
	Name string

	closeOnce sync.Once
}

// deadliner is a connection whose reads and writes can be bounded (a
// net.Conn).
type deadliner interface{ SetDeadline(time.Time) error }

// Handshake runs the RFB handshake on c (RFC 6143 §7.1–7.3): the highest
// version both speak (3.3, 3.7 or 3.8), the None security type (a display
// on a unix socket that only root and the hypervisor can open needs none;
// a server that asks for a password is refused), a shared ClientInit (the
// web console's viewers stay on), and the ServerInit. It then sets the
// pixel format to 32 bits per pixel, depth 24, little-endian true colour,
// and the encodings to Raw and DesktopSize. ctx bounds the handshake.
// The Client owns c from then on; Close closes it.
func Handshake(ctx context.Context, c io.ReadWriteCloser) (*Client, error) {
	cl := &Client{c: c, br: bufio.NewReaderSize(c, 64<<10)}
	stop := cl.bound(ctx)
	err := cl.handshake()
	if serr := stop(); err == nil && serr != nil {
		err = serr
	}
	if err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// bound makes ctx bound the I/O until the returned stop is called: a
// deadline on a connection that takes one, else the connection closed when
// ctx ends. stop returns ctx's error when it ended the I/O.
func (cl *Client) bound(ctx context.Context) (stop func() error) {
	if d, ok := cl.c.(deadliner); ok {
		if dl, has := ctx.Deadline(); has {
			_ = d.SetDeadline(dl)
		}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-ctx.Done():
			if d, ok := cl.c.(deadliner); ok {
				_ = d.SetDeadline(time.Unix(1, 0))
			} else {
				cl.Close()
			}
		case <-done:
		}
	}()
	return func() error {
		close(done)
		<-ended
		if d, ok := cl.c.(deadliner); ok {
			_ = d.SetDeadline(time.Time{})
		}
		return ctx.Err()
	}
}

func (cl *Client) handshake() error {
	var v [versionLen]byte
	if _, err := io.ReadFull(cl.br, v[:]); err != nil {
		return fmt.Errorf("read the server's RFB version: %w", err)
	}
	major, minor, err := parseVersion(v[:])
	if err != nil {
		return err
	}
	if major < 3 {
		return fmt.Errorf("the server speaks RFB %d.%d; want 3.3 or later", major, minor)
	}
	switch {
	case major > 3 || minor >= 8:
		minor = 8
	case minor == 7:
	default:
		minor = 3 // 3.3, and 3.4–3.6 as 3.3 (RFC 6143 §7.1.1)
	}
	if _, err := fmt.Fprintf(cl.c, "RFB 003.%03d\n", minor); err != nil {
		return fmt.Errorf("send the RFB version: %w", err)
	}
	if err := cl.security(minor); err != nil {
		return err
	}
	// ClientInit: share the desktop (RFC 6143 §7.3.1).
	if _, err := cl.c.Write([]byte{1}); err != nil {
		return fmt.Errorf("send ClientInit: %w", err)
	}
	var si [24]byte
	if _, err := io.ReadFull(cl.br, si[:]); err != nil {
		return fmt.Errorf("read ServerInit: %w", err)
	}
	cl.Width, cl.Height = int(binary.BigEndian.Uint16(si[0:])), int(binary.BigEndian.Uint16(si[2:]))
	if err := checkSize(cl.Width, cl.Height); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(si[20:])
	if n > maxName {
		return fmt.Errorf("ServerInit: want a desktop name of at most %d bytes, got %d", maxName, n)
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(cl.br, name); err != nil {
		return fmt.Errorf("read the desktop name: %w", err)
	}
	cl.Name = string(name)
	// SetPixelFormat (§7.5.1): 32 bpp, depth 24, little-endian, true
	// colour, 8 bits a channel, red at 16, green at 8, blue at 0.
	pf := []byte{msgSetPF, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}
	// SetEncodings (§7.5.2): Raw and the DesktopSize pseudo-encoding.
	enc := []byte{msgSetEnc, 0, 0, 2}
	enc = binary.BigEndian.AppendUint32(enc, uint32(int64(encRaw)))
	ds := encDesktopSize
	enc = binary.BigEndian.AppendUint32(enc, uint32(ds))
	if _, err := cl.c.Write(append(pf, enc...)); err != nil {
		return fmt.Errorf("send the pixel format and encodings: %w", err)
	}
	return nil
}

func parseVersion(v []byte) (major, minor int, err error) {
	if string(v[:4]) != "RFB " || v[7] != '.' || v[11] != '\n' {
		return 0, 0, fmt.Errorf("not an RFB server: its first 12 bytes are %q", v)
	}
	major, err1 := strconv.Atoi(string(v[4:7]))
	minor, err2 := strconv.Atoi(string(v[8:11]))
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("not an RFB version: %q", v)
	}
	return major, minor, nil
}

// security negotiates the None security type (RFC 6143 §7.1.2, §7.1.3;
// 3.3's form in §A.1).
func (cl *Client) security(minor int) error {
	if minor == 3 {
		var t [4]byte
		if _, err := io.ReadFull(cl.br, t[:]); err != nil {
			return fmt.Errorf("read the security type: %w", err)
		}
		switch st := binary.BigEndian.Uint32(t[:]); st {
		case 0:
			return fmt.Errorf("the server refused the connection: %s", cl.reason())
		case 1:
			return nil
		default:
			return fmt.Errorf("the display wants security type %d (a password); only an unauthenticated display (None) is supported", st)
		}
	}
	n, err := cl.br.ReadByte()
	if err != nil {
		return fmt.Errorf("read the security types: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("the server refused the connection: %s", cl.reason())
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(cl.br, types); err != nil {
		return fmt.Errorf("read the security types: %w", err)
	}
	none := false
	for _, t := range types {
		none = none || t == 1
	}
	if !none {
		return fmt.Errorf("the display offers security types %v and not None (1); only an unauthenticated display is supported", types)
	}
	if _, err := cl.c.Write([]byte{1}); err != nil {
		return fmt.Errorf("choose the None security type: %w", err)
	}
	if minor == 7 {
		return nil // 3.7 sends no SecurityResult for None
	}
	var r [4]byte
	if _, err := io.ReadFull(cl.br, r[:]); err != nil {
		return fmt.Errorf("read the SecurityResult: %w", err)
	}
	if binary.BigEndian.Uint32(r[:]) != 0 {
		return fmt.Errorf("the server refused the connection: %s", cl.reason())
	}
	return nil
}

// reason reads a failure reason (a length and a string).
func (cl *Client) reason() string {
	var l [4]byte
	if _, err := io.ReadFull(cl.br, l[:]); err != nil {
		return "no reason given"
	}
	n := binary.BigEndian.Uint32(l[:])
	b := make([]byte, min(n, maxReason))
	if _, err := io.ReadFull(cl.br, b); err != nil {
		return "no reason given"
	}
	return strconv.Quote(string(b))
}

func checkSize(w, h int) error {
	if w <= 0 || h <= 0 || w > maxSide || h > maxSide {
		return fmt.Errorf("the display is %d×%d pixels; want 1–%d on each side", w, h, maxSide)
	}
	return nil
}

// Close closes the display connection.
func (cl *Client) Close() error {
	var err error
	cl.closeOnce.Do(func() { err = cl.c.Close() })
	return err
}

// Capture asks for the whole screen (a FramebufferUpdateRequest that is
// not incremental, RFC 6143 §7.5.3) and reads updates until every pixel
// has come, following a change of the screen's size on the way. ctx bounds
// it.
func (cl *Client) Capture(ctx context.Context) (*image.RGBA, error) {
	stop := cl.bound(ctx)
	img, err := cl.capture()
	if serr := stop(); serr != nil {
		err = fmt.Errorf("capture the screen: %w", serr)
	}
	if err != nil {
		return nil, err
	}
	return img, nil
}

func (cl *Client) request() error {
	b := []byte{msgFBUReq, 0}
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(cl.Width))
	b = binary.BigEndian.AppendUint16(b, uint16(cl.Height))
	_, err := cl.c.Write(b)
	return err
}

func (cl *Client) capture() (*image.RGBA, error) {
	if err := cl.request(); err != nil {
		return nil, fmt.Errorf("request the screen: %w", err)
	}
	img := image.NewRGBA(image.Rect(0, 0, cl.Width, cl.Height))
	seen := make([]bool, cl.Width*cl.Height)
	left := len(seen)
	for left > 0 {
		t, err := cl.br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("read a server message: %w", err)
		}
		switch t {
		case 0: // FramebufferUpdate (§7.6.1)
			resized, err := cl.update(img, seen, &left)
			if err != nil {
				return nil, err
			}
			if resized {
				img = image.NewRGBA(image.Rect(0, 0, cl.Width, cl.Height))
				seen = make([]bool, cl.Width*cl.Height)
				left = len(seen)
				if err := cl.request(); err != nil {
					return nil, fmt.Errorf("request the screen: %w", err)
				}
			}
		case 1: // SetColourMapEntries (§7.6.2): not in true colour; skip
			var h [5]byte
			if _, err := io.ReadFull(cl.br, h[:]); err != nil {
				return nil, fmt.Errorf("read SetColourMapEntries: %w", err)
			}
			if _, err := cl.br.Discard(6 * int(binary.BigEndian.Uint16(h[3:]))); err != nil {
				return nil, fmt.Errorf("read SetColourMapEntries: %w", err)
			}
		case 2: // Bell
		case 3: // ServerCutText (§7.6.4)
			var h [7]byte
			if _, err := io.ReadFull(cl.br, h[:]); err != nil {
				return nil, fmt.Errorf("read ServerCutText: %w", err)
			}
			n := binary.BigEndian.Uint32(h[3:])
			if n > maxCutText {
				return nil, fmt.Errorf("ServerCutText: want at most %d bytes, got %d", maxCutText, n)
			}
			if _, err := cl.br.Discard(int(n)); err != nil {
				return nil, fmt.Errorf("read ServerCutText: %w", err)
			}
		default:
			return nil, fmt.Errorf("unknown server message type %d", t)
		}
	}
	return img, nil
}

// update reads one FramebufferUpdate's rectangles into img; it reports a
// change of the screen's size (DesktopSize), after which the caller asks
// for the whole screen again.
func (cl *Client) update(img *image.RGBA, seen []bool, left *int) (resized bool, err error) {
	var h [3]byte
	if _, err := io.ReadFull(cl.br, h[:]); err != nil {
		return false, fmt.Errorf("read FramebufferUpdate: %w", err)
	}
	n := int(binary.BigEndian.Uint16(h[1:]))
	if n > maxRects {
		return false, fmt.Errorf("FramebufferUpdate: %d rectangles", n)
	}
	for range n {
		var r [12]byte
		if _, err := io.ReadFull(cl.br, r[:]); err != nil {
			return false, fmt.Errorf("read a rectangle header: %w", err)
		}
		x, y := int(binary.BigEndian.Uint16(r[0:])), int(binary.BigEndian.Uint16(r[2:]))
		w, hh := int(binary.BigEndian.Uint16(r[4:])), int(binary.BigEndian.Uint16(r[6:]))
		switch enc := int32(binary.BigEndian.Uint32(r[8:])); enc {
		case encDesktopSize:
			if err := checkSize(w, hh); err != nil {
				return false, err
			}
			cl.Width, cl.Height, resized = w, hh, true
		case encRaw:
			if !resized && (x+w > cl.Width || y+hh > cl.Height) {
				return false, fmt.Errorf("a rectangle %d×%d at %d,%d outside the %d×%d screen", w, hh, x, y, cl.Width, cl.Height)
			}
			row := make([]byte, 4*w)
			for j := range hh {
				if _, err := io.ReadFull(cl.br, row); err != nil {
					return false, fmt.Errorf("read pixels: %w", err)
				}
				if resized {
					continue // the old screen's: read and dropped
				}
				o := img.PixOffset(x, y+j)
				for i := range w {
					// little-endian 0x00RRGGBB: B, G, R, pad
					img.Pix[o+4*i] = row[4*i+2]
					img.Pix[o+4*i+1] = row[4*i+1]
					img.Pix[o+4*i+2] = row[4*i]
					img.Pix[o+4*i+3] = 0xff
					k := (y+j)*cl.Width + x + i
					if !seen[k] {
						seen[k] = true
						*left--
					}
				}
			}
		default:
			return false, fmt.Errorf("a rectangle in encoding %d, which was not asked for", enc)
		}
	}
	return resized, nil
}

// Key sends one KeyEvent (RFC 6143 §7.5.4): the key with X keysym sym
// pressed (down) or released.
func (cl *Client) Key(sym uint32, down bool) error {
	d := byte(0)
	if down {
		d = 1
	}
	b := []byte{msgKeyEvent, d, 0, 0}
	b = binary.BigEndian.AppendUint32(b, sym)
	if _, err := cl.c.Write(b); err != nil {
		return fmt.Errorf("send a key: %w", err)
	}
	return nil
}
