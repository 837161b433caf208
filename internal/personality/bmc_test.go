package personality_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/media"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/sim"
)

// serveAtItsBMC builds a Redfish service as vbmcd builds it, over one
// simulated machine of personality name (--personality's option), with an
// image cache, and serves it over TLS on loopback as that machine's own BMC
// (AtBMC on every connection, as --bmc-addresses' listeners do). It
// returns the BMC's URL, the machine's id, and an image server on loopback
// that serves a small ISO, acme.iso.
func serveAtItsBMC(t *testing.T, name, user, pass string) (url, id, images string) {
	t.Helper()
	cache, err := media.New(media.Config{Dir: t.TempDir(), Policy: media.Policy{AllowLoopback: true}}) // the image server is on loopback
	if err != nil {
		t.Fatal(err)
	}
	iso := make([]byte, 64<<10)
	copy(iso[32769:], "CD001") // an ISO 9660 volume descriptor
	img := httptest.NewServer(http.FileServerFS(fstest.MapFS{"acme.iso": {Data: iso}}))
	t.Cleanup(img.Close)
	be := sim.New(1)
	svc := machine.NewService(be, zap.NewNop(), machine.WithImageFetcher(cache))
	srv := redfish.New(svc, zap.NewNop(), redfish.WithCredentials(user, pass), redfish.WithPersonality(name, ""))
	id = be.List()[0].ID
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context { return redfish.AtBMC(ctx, id) }
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL, id, img.URL
}
