package rfbench

import (
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/sim"
)

func serveForTest(t *testing.T) (string, func()) {
	t.Helper()
	svc := machine.NewService(sim.New(3), nil)
	ts := httptest.NewServer(redfish.New(svc, nil, redfish.WithCredentials("admin", "password")).Handler())
	return ts.URL, ts.Close
}

func itoa(i int) string { return strconv.Itoa(i) }
