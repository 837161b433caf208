// Package bmcclient is labctl's side of the lab's BMCs: the few Redfish
// calls an installer makes (a System's power and boot override, its
// virtual CD), sent through gofish from the lab's network namespace, where
// the nodes reach their BMCs, with the lab's BMC user. When labctl made the
// lab's CA (cluster.bmc.labCA, the default with TLS) it verifies the BMCs'
// certificate against it, as install-config tells Ironic to
// (bmcVerifyCA); without a lab CA it does not verify, as install-config
// then says (disableCertificateVerification). WaitAnswer is the bmcs
// step's check that every node's BMC answers; the agent mode boots its
// nodes through BootFromISO and Eject.
//
// What it does not do: serve BMCs (vbmcd) or know the installer's flow.
package bmcclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// MediaWait bounds how long a BMC may take to fetch an image.
var MediaWait = 15 * time.Minute

// SettleWait bounds how long a machine may take to power on or off before
// BootFromISO resets it.
var SettleWait = 5 * time.Minute

// requestTimeout bounds one request to a BMC.
const requestTimeout = 10 * time.Second

// TLSConfig is how labctl checks the lab's BMCs: against the lab's CA when
// the plan has one, not at all when it has none (nil for plain HTTP).
func TLSConfig(p *plan.Plan) (*tls.Config, error) {
	if p.BMC.Scheme != "https" {
		return nil, nil
	}
	if !p.BMC.LabCA {
		// install-config says disableCertificateVerification: vbmcd's
		// certificate is its own self-signed one.
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, nil //nolint:gosec // no lab CA: nothing to verify against
	}
	pem, err := os.ReadFile(p.Paths.CACert)
	if err != nil {
		return nil, fmt.Errorf("the lab's CA, which the BMCs' certificate is checked against: %w (`labctl up` makes it)", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the lab's CA %s holds no PEM certificate; remove it and run `labctl up` to make a new one", p.Paths.CACert)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// HTTP is an HTTP client whose sockets live in the lab's network
// namespace (it reaches the BMCs where the nodes reach them), checking
// the BMCs' certificate as TLSConfig says.
func HTTP(p *plan.Plan) (*http.Client, error) {
	tc, err := TLSConfig(p)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: requestTimeout, Transport: &http.Transport{
		DialContext:     netplumb.DialContextIn(p.Netns),
		TLSClientConfig: tc,
	}}, nil
}

// Client sends Redfish requests to the lab's BMCs as the lab's BMC user.
type Client struct {
	hc         *http.Client
	user, pass string
}

// New is a Client for the plan's BMCs.
func New(p *plan.Plan) (*Client, error) {
	hc, err := HTTP(p)
	if err != nil {
		return nil, err
	}
	return &Client{hc: hc, user: p.BMC.Username, pass: p.BMC.Password}, nil
}

// connect is a gofish client for the service a System URL is on, and the
// System's path there.
func (c *Client) connect(ctx context.Context, systemURL string) (*gofish.APIClient, string, error) {
	u, err := url.Parse(systemURL)
	if err != nil || u.Host == "" || !strings.HasPrefix(u.Path, "/redfish/v1/Systems/") {
		return nil, "", fmt.Errorf("%q is not a Redfish System URL", systemURL)
	}
	endpoint := u.Scheme + "://" + u.Host
	api, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint: endpoint, Username: c.user, Password: c.pass, BasicAuth: true,
		HTTPClient: c.hc, NoModifyTransport: true,
	})
	if err != nil {
		return nil, "", bmcError("GET "+endpoint+"/redfish/v1/", err)
	}
	return api, u.Path, nil
}

// bmcError says what was asked and what the BMC answered: its status and
// the first message of a Redfish error body.
func bmcError(what string, err error) error {
	var re *schemas.Error
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %w", what, err)
	}
	msg := re.Message
	if len(re.ExtendedInfos) > 0 && re.ExtendedInfos[0].Message != "" {
		msg = re.ExtendedInfos[0].Message
	}
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	return fmt.Errorf("%s: %d %s: %s", what, re.HTTPReturnedStatusCode, http.StatusText(re.HTTPReturnedStatusCode), strings.TrimSpace(msg))
}

// system reads the System at sys.
func (c *Client) system(ctx context.Context, sys string) (*schemas.ComputerSystem, error) {
	api, path, err := c.connect(ctx, sys)
	if err != nil {
		return nil, err
	}
	s, err := schemas.GetComputerSystem(api, path)
	if err != nil {
		return nil, bmcError("GET "+sys, err)
	}
	return s, nil
}

// cdDrive finds the system's virtual CD (the member whose media types
// include CD or DVD).
func cdDrive(s *schemas.ComputerSystem, sys string) (*schemas.VirtualMedia, error) {
	members, err := s.VirtualMedia()
	if err != nil {
		return nil, bmcError("GET "+sys+"/VirtualMedia", err)
	}
	for _, m := range members {
		for _, t := range m.MediaTypes {
			if t == schemas.CDVirtualMediaType || t == schemas.DVDVirtualMediaType {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("%s has no virtual CD", sys)
}

func inserted(vm *schemas.VirtualMedia) bool { return vm.Inserted != nil && *vm.Inserted }

// MediaFault is what the virtual CD of the System at sys says of its last
// insert, when it failed (its Status.Conditions, Redfish Resource.v1_11_0:
// vbmcd keeps a failed insert's message there until the next insert or
// eject); "" when it says nothing.
func (c *Client) MediaFault(ctx context.Context, sys string) (string, error) {
	s, err := c.system(ctx, sys)
	if err != nil {
		return "", err
	}
	cd, err := cdDrive(s, sys)
	if err != nil {
		return "", err
	}
	var msgs []string
	for _, cond := range cd.Status.Conditions {
		msgs = append(msgs, cond.Message)
	}
	return strings.Join(msgs, "; "), nil
}

// Eject ejects the virtual CD of the system at sys, when it holds media.
func (c *Client) Eject(ctx context.Context, sys string) error {
	s, err := c.system(ctx, sys)
	if err != nil {
		return err
	}
	cd, err := cdDrive(s, sys)
	if err != nil || !inserted(cd) {
		return err
	}
	if _, err := cd.EjectMedia(); err != nil {
		return bmcError("POST "+cd.ODataID+"/Actions/VirtualMedia.EjectMedia", err)
	}
	return nil
}

// BootFromISO inserts the ISO at url into the virtual CD of the system at
// sys, waits until the BMC has it (MediaWait), sets a Once boot override to
// the CD and powers the system on (or restarts it when it runs; a machine
// powering on or off is waited for, SettleWait). It
// reports whether it sent anything.
func (c *Client) BootFromISO(ctx context.Context, sys, image string) (bool, error) {
	s, err := c.system(ctx, sys)
	if err != nil {
		return false, err
	}
	cd, err := cdDrive(s, sys)
	if err != nil {
		return false, err
	}
	if !inserted(cd) || cd.Image != image {
		if inserted(cd) {
			if _, err := cd.EjectMedia(); err != nil {
				return false, bmcError("POST "+cd.ODataID+"/Actions/VirtualMedia.EjectMedia", err)
			}
		}
		yes := true
		if _, err := cd.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: image, Inserted: &yes, WriteProtected: &yes}); err != nil {
			return false, bmcError("POST "+cd.ODataID+"/Actions/VirtualMedia.InsertMedia", err)
		}
		if err := c.waitInserted(ctx, sys, cd.ODataID, image); err != nil {
			return true, err
		}
	}
	if err := s.SetBoot(&schemas.Boot{
		BootSourceOverrideTarget:  schemas.CdBootSource,
		BootSourceOverrideEnabled: schemas.OnceBootSourceOverrideEnabled,
		BootSourceOverrideMode:    schemas.UEFIBootSourceOverrideMode,
	}); err != nil {
		return true, bmcError("PATCH "+sys, err)
	}
	if s, err = c.settled(ctx, sys); err != nil {
		return true, err
	}
	reset := schemas.OnResetType
	if s.PowerState == schemas.OnPowerState {
		reset = schemas.ForceRestartResetType
	}
	if _, err := s.Reset(reset); err != nil {
		return true, bmcError(fmt.Sprintf("POST %s/Actions/ComputerSystem.Reset (%s)", sys, reset), err)
	}
	return true, nil
}

// settled reads the System at sys once its power is not changing: a BMC
// refuses a reset while the machine powers on or off (409; vbmcd's pacing
// of starts, --max-starting, can hold a machine PoweringOn for a while).
func (c *Client) settled(ctx context.Context, sys string) (*schemas.ComputerSystem, error) {
	deadline := time.Now().Add(SettleWait)
	for {
		s, err := c.system(ctx, sys)
		if err != nil {
			return nil, err
		}
		if s.PowerState != schemas.PoweringOnPowerState && s.PowerState != schemas.PoweringOffPowerState {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the System at %s is still %s after %s", sys, s.PowerState, SettleWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitInserted waits until the BMC shows the image in the drive at cd.
func (c *Client) waitInserted(ctx context.Context, sys, cd, image string) error {
	deadline := time.Now().Add(MediaWait)
	for {
		var vm *schemas.VirtualMedia
		api, _, err := c.connect(ctx, sys)
		if err == nil {
			if vm, err = schemas.GetVirtualMedia(api, cd); err != nil {
				err = bmcError("GET "+cd, err)
			}
		}
		if err == nil && inserted(vm) && vm.Image == image {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the BMC has not attached %s after %s (last error: %v)", image, MediaWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitAnswer waits up to wait until every node's Redfish System answers
// with its UUID at the plan's address, reached from the lab's namespace
// and, with a lab CA, with a certificate it issued; progress (may be nil)
// hears how many answer.
func WaitAnswer(ctx context.Context, p *plan.Plan, wait time.Duration, progress func(string)) error {
	c, err := New(p)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	for i, n := range p.Nodes {
		if progress != nil {
			progress(fmt.Sprintf("%d of %d BMCs answer; waiting for %s's", i, len(p.Nodes), n.Name))
		}
		for {
			err := c.answers(ctx, n.BMC.SystemURL, n.UUID)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the BMC of %s does not answer at %s (%v); see %s", n.Name, n.BMC.SystemURL, err, p.Vbmcd.Log)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// answers checks that the System at sys is the machine with uuid.
func (c *Client) answers(ctx context.Context, sys, uuid string) error {
	s, err := c.system(ctx, sys)
	if err != nil {
		return err
	}
	if !strings.EqualFold(s.UUID, uuid) {
		return fmt.Errorf("the System at %s is %s, not %s", sys, s.UUID, uuid)
	}
	return nil
}
