package wire

import (
	"errors"
	"fmt"
)

// Errors callers branch on; decoders wrap them with detail.
var (
	ErrShort     = errors.New("packet too short")
	ErrMalformed = errors.New("malformed packet")
	ErrChecksum  = errors.New("bad checksum")
)

func short(what string, want, got int) error {
	return fmt.Errorf("%w: %s: want %d bytes, got %d", ErrShort, what, want, got)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
