package media

import (
	"errors"

	"github.com/bmlab/bmlab/internal/netpolicy"
)

// Policy says which addresses images may be fetched from: the one
// outbound address policy of vbmcd (internal/netpolicy), which event
// deliveries are held to as well. It is checked on the address actually
// dialled, after name resolution, for every redirect hop.
type Policy = netpolicy.Policy

// ErrDenied marks a fetch refused by the Policy; clients are told this,
// the operator's log the address and the rule (netpolicy.DeniedError).
var ErrDenied = errors.New("the image server's address is not allowed by the BMC's media policy")

// refusedError is what a client is told of a refused address: the rule and
// the flag that would allow it, not the address (the operator's log has it).
type refusedError struct{ why string }

func (e *refusedError) Error() string {
	if e.why == "" {
		return ErrDenied.Error()
	}
	return ErrDenied.Error() + ": " + e.why
}
func (e *refusedError) Unwrap() error { return ErrDenied }

// refusal is the client's error for a fetch the policy refused.
func refusal(err error) error {
	var de *netpolicy.DeniedError
	if errors.As(err, &de) {
		return &refusedError{why: de.Rule}
	}
	return &refusedError{}
}
