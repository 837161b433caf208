package wire

import "fmt"

// CompletionCode is the first byte of every IPMI response (IPMI v2.0 §5.2,
// Table 5-2). Command-specific codes 0x80–0xBE mean what each command says.
type CompletionCode uint8

// Generic completion codes (IPMI v2.0 §5.2, Table 5-2).
const (
	CodeOK                  CompletionCode = 0x00
	CodeNodeBusy            CompletionCode = 0xc0
	CodeInvalidCommand      CompletionCode = 0xc1
	CodeInvalidForLUN       CompletionCode = 0xc2
	CodeTimeout             CompletionCode = 0xc3
	CodeOutOfSpace          CompletionCode = 0xc4
	CodeReservationInvalid  CompletionCode = 0xc5
	CodeDataTruncated       CompletionCode = 0xc6
	CodeDataLengthInvalid   CompletionCode = 0xc7
	CodeDataLengthExceeded  CompletionCode = 0xc8
	CodeParamOutOfRange     CompletionCode = 0xc9
	CodeCannotReturnBytes   CompletionCode = 0xca
	CodeNotPresent          CompletionCode = 0xcb
	CodeInvalidDataField    CompletionCode = 0xcc
	CodeIllegalForSensor    CompletionCode = 0xcd
	CodeCannotProvide       CompletionCode = 0xce
	CodeDuplicateRequest    CompletionCode = 0xcf
	CodeSDRUpdateMode       CompletionCode = 0xd0
	CodeFirmwareUpdateMode  CompletionCode = 0xd1
	CodeInitInProgress      CompletionCode = 0xd2
	CodeDestinationUnavail  CompletionCode = 0xd3
	CodeInsufficientPriv    CompletionCode = 0xd4
	CodeNotInPresentState   CompletionCode = 0xd5
	CodeSubFunctionDisabled CompletionCode = 0xd6
	CodeUnspecified         CompletionCode = 0xff
)

var codeNames = map[CompletionCode]string{
	CodeOK:                  "ok",
	CodeNodeBusy:            "node busy",
	CodeInvalidCommand:      "invalid command",
	CodeInvalidForLUN:       "invalid command for LUN",
	CodeTimeout:             "timeout",
	CodeOutOfSpace:          "out of space",
	CodeReservationInvalid:  "reservation cancelled or invalid",
	CodeDataTruncated:       "request data truncated",
	CodeDataLengthInvalid:   "request data length invalid",
	CodeDataLengthExceeded:  "request data length exceeded",
	CodeParamOutOfRange:     "parameter out of range",
	CodeCannotReturnBytes:   "cannot return the requested bytes",
	CodeNotPresent:          "requested data not present",
	CodeInvalidDataField:    "invalid data field in request",
	CodeIllegalForSensor:    "command illegal for sensor or record type",
	CodeCannotProvide:       "response could not be provided",
	CodeDuplicateRequest:    "duplicate request",
	CodeSDRUpdateMode:       "SDR repository in update mode",
	CodeFirmwareUpdateMode:  "device in firmware update mode",
	CodeInitInProgress:      "BMC initialisation in progress",
	CodeDestinationUnavail:  "destination unavailable",
	CodeInsufficientPriv:    "insufficient privilege",
	CodeNotInPresentState:   "not supported in present state",
	CodeSubFunctionDisabled: "sub-function disabled",
	CodeUnspecified:         "unspecified error",
}

func (c CompletionCode) String() string {
	if s, ok := codeNames[c]; ok {
		return fmt.Sprintf("%#02x (%s)", uint8(c), s)
	}
	return fmt.Sprintf("%#02x", uint8(c))
}

// Error makes a non-zero completion code usable as an error.
func (c CompletionCode) Error() string { return "ipmi completion code " + c.String() }
