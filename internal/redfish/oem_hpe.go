package redfish

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality/hpe"
)

// HPE's RIBCL (internal/personality/hpe): POST /ribcl at the BMC of its own
// of a machine whose personality serves it (iLO 6), the interface
// proliantutils drives a Gen11 through. The request carries its own login
// (LOGIN USER_LOGIN, PASSWORD), checked as Basic credentials are, and
// throttled alike; every command then acts on that BMC's machine through
// the machine model. Elsewhere (the shared listener, another vendor) the
// path is not found.

const ribclPath = "/ribcl"

// APIPath reports whether path is one the service answers (Redfish's, and
// iLO's RIBCL), for a front that serves other paths itself (the web
// console).
func APIPath(path string) bool {
	return strings.HasPrefix(path, "/redfish") || path == ribclPath || path == ribclPath+"/"
}

// serveRIBCL answers a RIBCL request; true when c was one.
func (s *Server) serveRIBCL(c *call) bool {
	if c.path != ribclPath {
		return false
	}
	m, err := s.svc.Get(c.bmc)
	if c.bmc == "" || err != nil {
		s.fail(c, newError(http.StatusNotFound, MsgResourceNotFound, "Resource", ribclPath))
		return true
	}
	if p, _ := s.personaOf(m); !p.RIBCL {
		s.fail(c, newError(http.StatusNotFound, MsgResourceNotFound, "Resource", ribclPath))
		return true
	}
	if c.r.Method != http.MethodPost {
		s.fail(c, newError(http.StatusMethodNotAllowed, MsgOperationNotAllowed).withHeader("Allow", "POST"))
		return true
	}
	c.m = m
	// The credentials are in the body, as a login's are: the request
	// waits for its body among those without credentials, and the body is
	// read as every body is (at most maxBody, charged to the budgets).
	if !admission.Anonymous(c.w, c.r) {
		return true
	}
	body, aerr := readBody(c.r, maxBody)
	if aerr != nil {
		s.fail(c, aerr)
		return true
	}
	answer := s.ribcl(c, body)
	h := c.w.Header()
	h["Content-Type"] = []string{"text/xml"}
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(answer)
	return true
}

// ribcl checks the request's login and runs its commands.
func (s *Server) ribcl(c *call, body []byte) []byte {
	req, err := hpe.ParseRequest(body)
	if err != nil {
		return hpe.Answer(err)
	}
	loginFailed := &hpe.Error{Status: hpe.StatusLoginFailed, Message: "Login failed."}
	if s.slowed(c) != nil {
		return hpe.Answer(loginFailed)
	}
	p, why := s.verify(c.bmc, req.User, req.Password, c.r.RemoteAddr)
	if p != nil {
		p = s.at(c, p)
	}
	if p == nil {
		s.refused(c, req.User, why)
		return hpe.Answer(loginFailed)
	}
	c.who = p
	admission.Authenticated(c.r)
	need := accounts.Login
	for _, cmd := range req.Commands {
		if cmd.Mode == "write" || cmd.Mode == "WRITE" {
			need = accounts.ConfigureComponents
		}
	}
	if c.who.priv&need != need {
		return hpe.Answer(&hpe.Error{Status: 0x0023, Message: "User does NOT have correct privilege for action. CONFIG_ILO_PRIV required."})
	}
	answer, changed := hpe.Execute(ctx(c), &ribclServer{s: s, c: c}, req)
	if changed {
		names := make([]string, len(req.Commands))
		for i, cmd := range req.Commands {
			names[i] = cmd.Name
		}
		s.logChange(c, "RIBCL", zap.Strings("commands", names))
	}
	return answer
}

// ribclServer is the machine of a RIBCL request, as hpe.Server.
type ribclServer struct {
	s *Server
	c *call
}

func (r *ribclServer) Machine() (*machine.Machine, error) {
	m, err := r.s.svc.Get(r.c.m.ID)
	if err == nil {
		r.c.m = m
	}
	return m, err
}

func (r *ribclServer) Product() string { return r.s.idOf(r.c.m).Model }
func (r *ribclServer) ILO() string {
	return firmwareVersion(r.c.m, machine.FirmwareBMC, r.s.idOf(r.c.m))
}
func (r *ribclServer) ROM() string {
	return firmwareVersion(r.c.m, machine.FirmwareBIOS, r.s.idOf(r.c.m))
}

func (r *ribclServer) Reset(ctx context.Context, rt machine.ResetType) error {
	if err := r.s.svc.Reset(ctx, r.c.m.ID, rt); err != nil {
		return err
	}
	r.s.afterReset(r.c, rt)
	return nil
}

func (r *ribclServer) SetBoot(ctx context.Context, p machine.BootPatch) error {
	_, err := r.s.svc.SetBoot(ctx, r.c.m.ID, p)
	return err
}

func (r *ribclServer) SetBootOrder(ctx context.Context, refs []string) error {
	_, err := r.s.svc.SetBootOrder(ctx, r.c.m.ID, refs)
	return err
}

func (r *ribclServer) SetPendingBootMode(ctx context.Context, mode machine.BootMode) error {
	v := "Uefi"
	if mode == machine.BootModeLegacy {
		v = "Bios"
	}
	_, err := r.s.svc.SetBIOSPending(ctx, r.c.m.ID, map[string]any{machine.BIOSBootMode: v})
	return err
}

// Insert starts the insert and waits for it as long as InsertMedia does
// before it answers 202: a fetch that failed by then is the command's
// error; one still loading goes on (a power-on waits for it).
func (r *ribclServer) Insert(ctx context.Context, slot machine.MediaSlot, url string) error {
	t, err := r.s.svc.InsertMedia(ctx, r.c.m.ID, slot, machine.InsertRequest{Image: url})
	r.s.afterInsert(r.c, slot)
	if err != nil {
		return mediaRIBCL(err)
	}
	timer := time.NewTimer(r.s.insertWait)
	defer timer.Stop()
	select {
	case <-t.Done():
		if st := t.Status(); st.State == machine.TaskException {
			return mediaRIBCL(st.Err)
		}
	case <-timer.C:
	}
	return nil
}

func (r *ribclServer) Media(m *machine.Machine, slot machine.MediaSlot) machine.Media {
	if _, ms, err := r.s.svc.Media(m.ID); err == nil {
		for _, md := range ms {
			if md.Slot == slot {
				return md
			}
		}
	}
	return machine.MediaOf(m, slot)
}

func (r *ribclServer) Eject(ctx context.Context, slot machine.MediaSlot) error {
	md := machine.MediaOf(r.c.m, slot)
	if err := r.s.svc.EjectMedia(ctx, r.c.m.ID, slot); err != nil {
		return err
	}
	r.s.afterEject(r.c, slot, md.Image)
	return nil
}

// mediaRIBCL is a failed insert as iLO words it: the image could not be
// reached or read.
func mediaRIBCL(err error) error {
	if _, ok := machine.IsMediaError(err); ok || errors.Is(err, machine.ErrInvalid) {
		return &hpe.Error{Status: hpe.StatusVirtualMed, Message: "An invalid Virtual Media option has been given: " + err.Error()}
	}
	return err
}
