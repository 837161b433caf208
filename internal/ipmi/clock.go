package ipmi

import (
	"encoding/binary"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// setSELTime (IPMI v2.0 §31.11) sets the BMC's clock, the same one Redfish's
// Manager DateTime sets (machine/clock.go): seconds since 1970, little
// endian, UTC.
func (b *bmc) setSELTime(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	t := time.Unix(int64(binary.LittleEndian.Uint32(d)), 0).UTC()
	if _, err := b.svc.SetClock(b.ctx, b.id, &t, nil, time.Now()); err != nil {
		return codeFor(err), nil
	}
	return wire.CodeOK, nil
}
