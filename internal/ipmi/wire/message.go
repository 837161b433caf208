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

func decodeMsg(what string, b []byte, min int) error {
	if len(b) < min {
		return short(what, min, len(b))
	}
	if checksum(b[0:2]) != b[2] {
		return ErrChecksum
	}
	if checksum(b[3:len(b)-1]) != b[len(b)-1] {
		return ErrChecksum
	}
	return nil
}

// DecodeRequest decodes an IPMI request message and checks both checksums.
func DecodeRequest(b []byte) (Request, error) {
	if err := decodeMsg("ipmi request", b, msgMinLen); err != nil {
		return Request{}, err
	}
	return Request{
		RsAddr: b[0],
		NetFn:  NetFn(b[1] >> 2),
		RsLUN:  b[1] & 3,
		RqAddr: b[3],
		RqSeq:  b[4] >> 2,
		RqLUN:  b[4] & 3,
		Cmd:    b[5],
		Data:   b[6 : len(b)-1],
	}, nil
}

// Append appends the encoded request to b.
func (r Request) Append(b []byte) []byte {
	start := len(b)
	b = append(b, r.RsAddr, byte(r.NetFn)<<2|r.RsLUN&3)
	b = append(b, checksum(b[start:]))
	mid := len(b)
	b = append(b, r.RqAddr, r.RqSeq<<2|r.RqLUN&3, r.Cmd)
	b = append(b, r.Data...)
	return append(b, checksum(b[mid:]))
}

// DecodeResponse decodes an IPMI response message and checks both checksums.
func DecodeResponse(b []byte) (Response, error) {
	if err := decodeMsg("ipmi response", b, msgMinLen+1); err != nil {
		return Response{}, err
	}
	return Response{
		RqAddr: b[0],
		NetFn:  NetFn(b[1] >> 2),
		RqLUN:  b[1] & 3,
		RsAddr: b[3],
		RqSeq:  b[4] >> 2,
		RsLUN:  b[4] & 3,
		Cmd:    b[5],
		Code:   CompletionCode(b[6]),
		Data:   b[7 : len(b)-1],
	}, nil
}

// Append appends the encoded response to b.
func (r Response) Append(b []byte) []byte {
	start := len(b)
	b = append(b, r.RqAddr, byte(r.NetFn)<<2|r.RqLUN&3)
	b = append(b, checksum(b[start:]))
	mid := len(b)
	b = append(b, r.RsAddr, r.RqSeq<<2|r.RsLUN&3, r.Cmd, byte(r.Code))
	b = append(b, r.Data...)
	return append(b, checksum(b[mid:]))
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
