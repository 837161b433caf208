package wire

import (
	"bufio"
	"fmt"
)

// The VM protocol: how qemu's ipmi-bmc-extern device hands the requests a
// guest writes to its KCS interface to a BMC outside qemu, over a chardev
// (a unix socket here). It is OpenIPMI's "VM" serial codec: lanserv/README.vm
// and lanserv/serial_ipmi.c (vm_handle_char, vm_send) in OpenIPMI, and
// hw/ipmi/ipmi_bmc_extern.c in qemu (receive, addchar, handle_hw_op).
//
// A stream of bytes is cut into frames by two end markers: VMMsgChar ends
// an IPMI message, VMCmdChar a control command. Inside a frame, a byte
// equal to one of the three special characters is sent as VMEscapeChar
// followed by the byte with bit 4 set (0xA0 goes as 0xAA 0xB0); the
// receiver clears bit 4 of the byte after an escape.
//
// A request (qemu to the BMC) is: seq, netFn<<2|LUN, cmd, data…, checksum;
// the response (BMC to qemu) is the same with the completion code after
// cmd. seq is returned as it came; the checksum makes the frame's bytes,
// seq included, sum to zero modulo 256. qemu's KCS passes on one request
// at a time and fails it with C3h (timeout) when no response comes within
// 4 s of the guest's virtual clock.
//
// A command is its code byte and its arguments.
const (
	VMMsgChar    = 0xA0 // ends a message
	VMCmdChar    = 0xA1 // ends a command
	VMEscapeChar = 0xAA // the next byte has bit 4 set and stands for itself with it clear
)

// VMCommand is a control command of the VM protocol.
type VMCommand uint8

// Commands. qemu sends Version (with VMProtocolVersion) and Capabilities
// (with the VMCap bits) when it connects, and Reset when the machine
// resets; the BMC sends the others, only those the capabilities allow.
const (
	VMCmdNoAttn           VMCommand = 0x00 // clear the KCS status register's attention bit
	VMCmdAttn             VMCommand = 0x01 // set it, no interrupt
	VMCmdAttnIRQ          VMCommand = 0x02 // set it and raise the interrupt
	VMCmdPowerOff         VMCommand = 0x03 // power the machine off
	VMCmdReset            VMCommand = 0x04 // BMC→qemu: reset the machine; qemu→BMC: the machine reset
	VMCmdEnableIRQ        VMCommand = 0x05 // enable the interface's interrupt
	VMCmdDisableIRQ       VMCommand = 0x06 // disable it
	VMCmdSendNMI          VMCommand = 0x07 // raise a non-maskable interrupt
	VMCmdCapabilities     VMCommand = 0x08 // qemu→BMC: one byte of VMCap bits
	VMCmdGracefulShutdown VMCommand = 0x09 // ask the guest to shut down (ACPI)
	VMCmdVersion          VMCommand = 0xff // one byte: the protocol version
)

// VMProtocolVersion is the version both ends speak.
const VMProtocolVersion = 1

// Capability bits of VMCmdCapabilities: what qemu lets the BMC do. qemu 7.2
// (Debian 12) announces 0x3f, all of them.
const (
	VMCapPower            = 0x01
	VMCapReset            = 0x02
	VMCapIRQ              = 0x04
	VMCapNMI              = 0x08
	VMCapAttn             = 0x10
	VMCapGracefulShutdown = 0x20
)

// VMMaxFrame bounds a frame's unescaped bytes: qemu's largest message (300
// bytes, MAX_IPMI_MSG_SIZE) with the sequence number and the checksum,
// rounded up. A longer frame is dropped whole.
const VMMaxFrame = 320

// VMFrame is one frame of the stream, unescaped, without its end marker.
type VMFrame struct {
	Command bool // ended by VMCmdChar; else a message
	Data    []byte
}

// VMReader cuts a stream into frames. Its memory is bounded by VMMaxFrame
// whatever the stream holds.
type VMReader struct {
	r      *bufio.Reader
	buf    []byte
	escape bool
	long   bool
}

// NewVMReader reads frames from r.
func NewVMReader(r *bufio.Reader) *VMReader {
	return &VMReader{r: r, buf: make([]byte, 0, VMMaxFrame)}
}

// Next returns the next frame. A frame over VMMaxFrame, or one whose last
// byte is an escape, is an ErrMalformed error: the caller may go on reading
// (the stream is in step again after the marker); an error of the reader
// ends the stream. Empty frames are skipped. The frame's Data is valid
// until the next call.
func (d *VMReader) Next() (VMFrame, error) {
	for {
		c, err := d.r.ReadByte()
		if err != nil {
			return VMFrame{}, err
		}
		switch c {
		case VMMsgChar, VMCmdChar:
			f := VMFrame{Command: c == VMCmdChar, Data: d.buf}
			long, escape := d.long, d.escape
			d.buf, d.long, d.escape = d.buf[:0], false, false
			switch {
			case long:
				return VMFrame{}, malformed("vm frame over %d bytes", VMMaxFrame)
			case escape:
				return VMFrame{}, malformed("vm frame ends in an escape")
			case len(f.Data) == 0:
				continue
			}
			return f, nil
		case VMEscapeChar:
			d.escape = true
		default:
			if d.escape {
				c &^= 0x10
				d.escape = false
			}
			if len(d.buf) == VMMaxFrame {
				d.long = true
				continue
			}
			if !d.long {
				d.buf = append(d.buf, c)
			}
		}
	}
}

// vmAdd appends c to b, escaped when it is a special character.
func vmAdd(b []byte, c byte) []byte {
	switch c {
	case VMMsgChar, VMCmdChar, VMEscapeChar:
		return append(b, VMEscapeChar, c|0x10)
	}
	return append(b, c)
}

// VMHeader is what starts a message frame either way: seq, netFn/LUN and
// cmd.
type VMHeader struct {
	Seq   uint8
	NetFn NetFn
	LUN   uint8
	Cmd   uint8
}

func decodeVMHeader(f []byte) VMHeader {
	return VMHeader{Seq: f[0], NetFn: NetFn(f[1] >> 2), LUN: f[1] & 3, Cmd: f[2]}
}

// VMRequest is a request as qemu sends it.
type VMRequest struct {
	VMHeader
	Data []byte
}

// DecodeVMRequest decodes a message frame: at least seq, netFn/LUN, cmd and
// the checksum, which must make the frame sum to zero.
func DecodeVMRequest(f []byte) (VMRequest, error) {
	if err := checkVM("vm request", f, 4); err != nil {
		return VMRequest{}, err
	}
	return VMRequest{VMHeader: decodeVMHeader(f), Data: f[3 : len(f)-1]}, nil
}

// checkVM checks a message frame's length and that its bytes sum to zero.
func checkVM(what string, f []byte, min int) error {
	if len(f) < min {
		return short(what, min, len(f))
	}
	if checksum(f) != 0 {
		return ErrChecksum
	}
	return nil
}

// AppendRequest appends the framed request to b, as qemu sends it.
func (r VMRequest) AppendRequest(b []byte) []byte {
	return appendVMMessage(b, []byte{r.Seq, byte(r.NetFn)<<2 | r.LUN&3, r.Cmd}, r.Data)
}

// AppendResponse appends the framed response to r (netFn + 1, the same
// seq, LUN and command) to b.
func (r VMRequest) AppendResponse(b []byte, code CompletionCode, data []byte) []byte {
	return appendVMMessage(b, []byte{r.Seq, byte(r.NetFn|1)<<2 | r.LUN&3, r.Cmd, byte(code)}, data)
}

func appendVMMessage(b, head, data []byte) []byte {
	for _, c := range head {
		b = vmAdd(b, c)
	}
	for _, c := range data {
		b = vmAdd(b, c)
	}
	return append(vmAdd(b, checksum(head)+checksum(data)), VMMsgChar)
}

// VMResponse is a response as the BMC sends it: the request's header with
// netFn + 1, then the completion code.
type VMResponse struct {
	VMHeader
	Code CompletionCode
	Data []byte
}

// DecodeVMResponse decodes a response frame (what a client on qemu's side
// reads).
func DecodeVMResponse(f []byte) (VMResponse, error) {
	if err := checkVM("vm response", f, 5); err != nil {
		return VMResponse{}, err
	}
	return VMResponse{VMHeader: decodeVMHeader(f), Code: CompletionCode(f[3]), Data: f[4 : len(f)-1]}, nil
}

// AppendVMCommand appends a framed command with its arguments to b.
func AppendVMCommand(b []byte, c VMCommand, args ...byte) []byte {
	b = vmAdd(b, byte(c))
	for _, a := range args {
		b = vmAdd(b, a)
	}
	return append(b, VMCmdChar)
}

// String names a command.
func (c VMCommand) String() string {
	switch c {
	case VMCmdNoAttn:
		return "no-attn"
	case VMCmdAttn:
		return "attn"
	case VMCmdAttnIRQ:
		return "attn-irq"
	case VMCmdPowerOff:
		return "power-off"
	case VMCmdReset:
		return "reset"
	case VMCmdEnableIRQ:
		return "enable-irq"
	case VMCmdDisableIRQ:
		return "disable-irq"
	case VMCmdSendNMI:
		return "nmi"
	case VMCmdCapabilities:
		return "capabilities"
	case VMCmdGracefulShutdown:
		return "graceful-shutdown"
	case VMCmdVersion:
		return "version"
	}
	return fmt.Sprintf("vm-command-%#02x", uint8(c))
}
