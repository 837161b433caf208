package wire

// NetFn is an IPMI network function (IPMI v2.0 §5.1, Table 5-1). Requests
// use even values; the response's is one more.
type NetFn uint8

// Network functions.
const (
	NetFnChassis   NetFn = 0x00
	NetFnBridge    NetFn = 0x02
	NetFnSensor    NetFn = 0x04
	NetFnApp       NetFn = 0x06
	NetFnFirmware  NetFn = 0x08
	NetFnStorage   NetFn = 0x0a
	NetFnTransport NetFn = 0x0c
)

// Addresses and LUNs of a LAN session (IPMI v2.0 §13.8).
const (
	BMCSlaveAddr      = 0x20 // the BMC's responder address
	RemoteConsoleAddr = 0x81 // software ID of a remote console
)

// Request is an IPMI request message in a LAN session (IPMI v2.0 §13.8,
// Table 13-4): rsAddr, netFn/rsLUN, checksum, rqAddr, rqSeq/rqLUN, cmd,
// data, checksum.
type Request struct {
	RsAddr uint8
	NetFn  NetFn
	RsLUN  uint8
	RqAddr uint8
	RqSeq  uint8 // 6 bits
	RqLUN  uint8
	Cmd    uint8
	Data   []byte
}

// Response is an IPMI response message (IPMI v2.0 §13.8, Table 13-5).
type Response struct {
	RqAddr uint8
	NetFn  NetFn // the response's netFn (request's + 1)
	RqLUN  uint8
	RsAddr uint8
	RqSeq  uint8
	RsLUN  uint8
	Cmd    uint8
	Code   CompletionCode
	Data   []byte
}

const msgMinLen = 7 // 6 header bytes and the final checksum

// checksum is the 2's complement checksum (IPMI v2.0 §13.8): the bytes plus
// the checksum sum to zero, modulo 256.
func checksum(b []byte) byte {
	var s byte
	for _, c := range b {
		s += c
	}
	return -s
}

// msgHeader is the part of a message requests and responses share (IPMI
// v2.0 §13.8, Tables 13-4 and 13-5), by place: the first address with the
// netFn and its LUN, the header checksum, the second address with the
// sequence number and its LUN, the command. A request's first address and
// LUN are the responder's, a response's the requester's.
type msgHeader struct {
	addr1 *uint8
	netFn *NetFn
	lun1  *uint8
	addr2 *uint8
	seq   *uint8
	lun2  *uint8
	cmd   *uint8
}

// decode checks b's length and both checksums, and fills h's fields from
// b's first six bytes.
func (h msgHeader) decode(what string, b []byte, min int) error {
	if len(b) < min {
		return short(what, min, len(b))
	}
	if checksum(b[0:2]) != b[2] {
		return ErrChecksum
	}
	if checksum(b[3:len(b)-1]) != b[len(b)-1] {
		return ErrChecksum
	}
	*h.addr1, *h.netFn, *h.lun1 = b[0], NetFn(b[1]>>2), b[1]&3
	*h.addr2, *h.seq, *h.lun2, *h.cmd = b[3], b[4]>>2, b[4]&3, b[5]
	return nil
}

// append appends the message with h's fields and body, and both checksums,
// to b.
func (h msgHeader) append(b []byte, body ...[]byte) []byte {
	start := len(b)
	b = append(b, *h.addr1, byte(*h.netFn)<<2|*h.lun1&3)
	b = append(b, checksum(b[start:]))
	mid := len(b)
	b = append(b, *h.addr2, *h.seq<<2|*h.lun2&3, *h.cmd)
	for _, p := range body {
		b = append(b, p...)
	}
	return append(b, checksum(b[mid:]))
}

func (r *Request) header() msgHeader {
	return msgHeader{&r.RsAddr, &r.NetFn, &r.RsLUN, &r.RqAddr, &r.RqSeq, &r.RqLUN, &r.Cmd}
}

func (r *Response) header() msgHeader {
	return msgHeader{&r.RqAddr, &r.NetFn, &r.RqLUN, &r.RsAddr, &r.RqSeq, &r.RsLUN, &r.Cmd}
}

// DecodeRequest decodes an IPMI request message and checks both checksums.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	if err := r.header().decode("ipmi request", b, msgMinLen); err != nil {
		return Request{}, err
	}
	r.Data = b[6 : len(b)-1]
	return r, nil
}

// Append appends the encoded request to b.
func (r Request) Append(b []byte) []byte {
	return r.header().append(b, r.Data)
}

// DecodeResponse decodes an IPMI response message and checks both checksums.
func DecodeResponse(b []byte) (Response, error) {
	var r Response
	if err := r.header().decode("ipmi response", b, msgMinLen+1); err != nil {
		return Response{}, err
	}
	r.Code, r.Data = CompletionCode(b[6]), b[7:len(b)-1]
	return r, nil
}

// Append appends the encoded response to b.
func (r Response) Append(b []byte) []byte {
	return r.header().append(b, []byte{byte(r.Code)}, r.Data)
}

// ResponseTo returns the response skeleton for req: addresses swapped,
// netFn + 1, the same sequence number and command.
func ResponseTo(req Request, code CompletionCode, data []byte) Response {
	return Response{
		RqAddr: req.RqAddr,
		NetFn:  req.NetFn | 1,
		RqLUN:  req.RqLUN,
		RsAddr: req.RsAddr,
		RqSeq:  req.RqSeq,
		RsLUN:  req.RsLUN,
		Cmd:    req.Cmd,
		Code:   code,
		Data:   data,
	}
}
