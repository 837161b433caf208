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
