package redfish

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/personality/dell"
)

// Dell's OEM (internal/personality/dell), served for machines whose
// personality has it (DellOEM): the Server Configuration Profile's import
// and export under the Manager's Actions.Oem, each a job whose Task is its
// own task monitor (/redfish/v1/TaskService/Tasks/JID_…); the job queue
// (Oem/Dell/Jobs) and the job service that deletes jobs; the Lifecycle
// Controller's status; the iDRAC card's reset. The profile's settings go
// to the machine model as one configuration job
// (machine.Service.ApplyConfiguration); the jobs' Dell views are kept here.

// dellJobs keeps the Dell jobs the service ran, the newest maxDellJobs.
type dellJobs struct {
	mu    sync.Mutex
	byID  map[string]*dell.Job
	order []string
}

const maxDellJobs = 256

func (d *dellJobs) add(j *dell.Job) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byID == nil {
		d.byID = map[string]*dell.Job{}
	}
	d.byID[j.ID] = j
	d.order = append(d.order, j.ID)
	for len(d.order) > maxDellJobs {
		delete(d.byID, d.order[0])
		d.order = d.order[1:]
	}
}

func (d *dellJobs) get(id string) *dell.Job {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byID[id]
}

// of lists machine id's jobs, oldest first.
func (d *dellJobs) of(id string) []*dell.Job {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*dell.Job
	for _, jid := range d.order {
		if j := d.byID[jid]; j.Task.MachineID == id {
			out = append(out, j)
		}
	}
	return out
}

// remove deletes the jobs for which drop is true.
func (d *dellJobs) remove(drop func(*dell.Job) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.order = slices.DeleteFunc(d.order, func(jid string) bool {
		if drop(d.byID[jid]) {
			delete(d.byID, jid)
			return true
		}
		return false
	})
}

// dellOnly serves h for machines whose personality has Dell's OEM.
func dellOnly(h handlerFunc) handlerFunc {
	return oemOnly(func(p *personality.Personality) bool { return p.DellOEM }, "Resource", h)
}

func dellRoutes() []*route {
	const m = "Managers/*"
	return []*route{
		r(m+dell.ImportAction, route{post: dellOnly(postImportSCP)}),
		r(m+dell.ExportAction, route{post: dellOnly(postExportSCP)}),
		r(m+dell.JobServicePath, route{get: dellOnly(dellStatic(dell.JobService))}),
		r(m+dell.DeleteJobsAction, route{post: dellOnly(postDeleteJobQueue)}),
		// The DellLCService itself, with the screenshot: screen.go.
		r(m+dell.LCStatusAction, route{post: dellOnly(postLCStatus), write: accounts.Login}),
		r("Dell/Managers/*/DellLCService/Actions/"+dell.LCStatusName, route{post: dellOnly(postLCStatus), write: accounts.Login}),
		r(m+dell.CardServicePath, route{get: dellOnly(dellStatic(dell.CardService))}),
		r(m+dell.CardResetAction, route{post: dellOnly(postIDRACReset), write: accounts.ConfigureManager}),
		r(m+dell.JobsPath, route{get: dellOnly(getDellJobs), expand: true}),
		r(m+dell.JobsPath+"/*", route{get: dellOnly(getDellJob)}),
	}
}

func dellStatic(body func(managerURI string) obj) handlerFunc {
	return func(s *Server, c *call) *apiError {
		s.writeJSON(c, http.StatusOK, body(managerURI(c.m.ID)))
		return nil
	}
}

// dellManager adds Dell's actions and links to a Manager body.
func dellManager(o obj, m *machine.Machine) {
	o["Actions"].(obj)["Oem"] = dell.ManagerActions(managerURI(m.ID))
	o["Links"].(obj)["Oem"] = dell.ManagerLinks(managerURI(m.ID))
}

// scpAction reads an import's or export's parameters (ShareParameters and
// params) and its targets.
func (s *Server) scpAction(c *call, action string, params ...string) (map[string]any, []string, *apiError) {
	body, aerr := actionParams(c, action, append(params, "ShareParameters")...)
	if aerr != nil {
		return nil, nil, aerr
	}
	targets, aerr := s.scpTargets(c, body, action)
	return body, targets, aerr
}

// scpTargets reads ShareParameters.Target: a string ("ALL", "IDRAC,BIOS")
// or, with the quirk scp-target-list (iDRAC 10), a list (["ALL"]); the
// other form is refused. vbmcd takes the profile in the request and
// answers an export in its task: a share (ShareType other than Local, an
// address, a file) is refused.
func (s *Server) scpTargets(c *call, body map[string]any, action string) ([]string, *apiError) {
	const param = "ShareParameters"
	v, ok := body[param]
	if !ok {
		return nil, newError(http.StatusBadRequest, MsgActionParameterMissing, action, param)
	}
	sp, ok := v.(map[string]any)
	if !ok {
		return nil, newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(v), param, action)
	}
	for _, k := range slices.Sorted(mapKeys(sp)) {
		switch {
		case k == "Target" || strings.HasPrefix(k, "@"):
		case k == "ShareType":
			if st, _ := sp[k].(string); !strings.EqualFold(st, "Local") {
				return nil, newError(http.StatusBadRequest, MsgActionParameterValueNotInList, argText(sp[k]), param+"/ShareType", action).
					with("This iDRAC takes the profile in ImportBuffer and answers an export in its task: ShareType Local, or none.")
			}
		default:
			return nil, newError(http.StatusBadRequest, MsgActionParameterNotSupported, param+"/"+k, action).
				with("This iDRAC reads and writes no network share: send the profile in ImportBuffer, read an export from its task.")
		}
	}
	t, ok := sp["Target"]
	if !ok {
		return nil, newError(http.StatusBadRequest, MsgActionParameterMissing, action, param+"/Target")
	}
	list := s.has(c.m, personality.SCPTargetList)
	var targets []string
	switch tv := t.(type) {
	case string:
		if list {
			return nil, newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(tv), param+"/Target", action).
				with(`This iDRAC takes Target as a list, such as ["ALL"].`)
		}
		targets = strings.Split(tv, ",")
	case []any:
		if !list {
			return nil, newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(tv), param+"/Target", action).
				with(`This iDRAC takes Target as a string, such as "ALL" or "IDRAC,BIOS".`)
		}
		for _, e := range tv {
			es, ok := e.(string)
			if !ok {
				return nil, newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(e), param+"/Target", action)
			}
			targets = append(targets, es)
		}
	default:
		return nil, newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(t), param+"/Target", action)
	}
	for i, tg := range targets {
		tg = strings.ToUpper(strings.TrimSpace(tg))
		if !slices.Contains(dell.Targets, tg) {
			return nil, newError(http.StatusBadRequest, MsgActionParameterValueNotInList, argText(targets[i]), param+"/Target", action).
				with("The targets are " + strings.Join(dell.Targets, ", ") + ".")
		}
		targets[i] = tg
	}
	if len(targets) == 0 {
		return nil, newError(http.StatusBadRequest, MsgActionParameterMissing, action, param+"/Target")
	}
	return targets, nil
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// writeSuccess answers an action 200 with o and the Base Success message.
func (s *Server) writeSuccess(c *call, o obj) *apiError {
	o["@Message.ExtendedInfo"] = []messageObject{newMessage(MsgSuccess)}
	s.writeJSON(c, http.StatusOK, o)
	return nil
}

// optEnum reads an optional string parameter that must be one of values;
// def when it is not given.
func optEnum(body map[string]any, action, name string, values []string, def string) (string, *apiError) {
	if _, ok := body[name]; !ok {
		return def, nil
	}
	return enumParam(body, action, name, values)
}

// postImportSCP is ImportSystemConfiguration: the profile in ImportBuffer
// becomes one configuration job of the machine; the answer is 202 with the
// job's Task as Location. What waits for a boot is applied by a reboot
// vbmcd makes itself when ShutdownType is Graceful (the default) or
// Forced and the server is on; with NoReboot, by the next boot anyone
// makes (Ironic's import_configuration reboots the node itself).
func postImportSCP(s *Server, c *call) *apiError {
	const action = "OemManager.ImportSystemConfiguration"
	body, targets, aerr := s.scpAction(c, action, "ImportBuffer", "ShutdownType", "HostPowerState", "TimeToWait")
	if aerr != nil {
		return aerr
	}
	shutdown, aerr := optEnum(body, action, "ShutdownType", dell.ShutdownTypes, "Graceful")
	if aerr != nil {
		return aerr
	}
	endState, aerr := optEnum(body, action, "HostPowerState", dell.HostPowerStates, "")
	if aerr != nil {
		return aerr
	}
	buf, aerr := stringParam(body, action, "ImportBuffer", true)
	if aerr != nil {
		return aerr.with("This iDRAC reads no network share: send the profile in ImportBuffer.")
	}
	profile, err := dell.ParseProfile(buf)
	if err != nil {
		return newError(http.StatusBadRequest, MsgActionParameterValueFormatError, truncate(buf, 32), "ImportBuffer", action).with(err.Error())
	}
	cfg, outcomes := dell.Import(profile, targets, c.m, nicIDs(c.m))
	t, err := s.svc.ApplyConfiguration(ctx(c), c.m.ID, cfg)
	if err != nil {
		return s.modelError(c, err)
	}
	taken := slices.ContainsFunc(outcomes, func(o dell.Outcome) bool { return o.Err == "" })
	job := &dell.Job{ID: dell.JobID(t.ID), Kind: dell.ImportJob, Task: t, Started: t.Started, Outcomes: outcomes, Taken: taken}
	s.dell.add(job)
	s.logChange(c, "configuration profile imported", zap.String("job", job.ID), zap.Strings("changed", t.Config.Changed),
		zap.Int("attributes", len(outcomes)), zap.Bool("at boot", t.Config.AtBoot))
	if aerr := s.finishImport(c, t, shutdown, endState); aerr != nil {
		return aerr
	}
	c.w.Header().Set("Location", dell.TaskURI(job.ID))
	c.w.WriteHeader(http.StatusAccepted)
	return nil
}

// finishImport makes the boot an import waits for, as ShutdownType asks,
// and leaves the server in HostPowerState.
func (s *Server) finishImport(c *call, t *machine.Task, shutdown, endState string) *apiError {
	m, err := s.svc.Get(c.m.ID)
	if err != nil {
		return s.modelError(c, err)
	}
	var rt machine.ResetType
	switch {
	case t.Config.AtBoot && shutdown != "NoReboot" && m.Power == machine.PowerOn && shutdown == "Forced":
		rt = machine.ResetForceRestart
	case t.Config.AtBoot && shutdown != "NoReboot" && m.Power == machine.PowerOn:
		rt = machine.ResetGracefulRestart
	case endState == "On" && m.Power == machine.PowerOff:
		rt = machine.ResetOn
	}
	if rt != "" {
		if err := s.svc.Reset(ctx(c), m.ID, rt); err != nil {
			return s.modelError(c, err)
		}
		s.afterReset(c, rt)
	}
	if endState == "Off" {
		if err := s.svc.Reset(ctx(c), m.ID, machine.ResetForceOff); err != nil {
			return s.modelError(c, err)
		}
		s.afterReset(c, machine.ResetForceOff)
	}
	return nil
}

// postExportSCP is ExportSystemConfiguration: the profile of the
// components Target names, which the job's Task answers once done.
func postExportSCP(s *Server, c *call) *apiError {
	const action = "OemManager.ExportSystemConfiguration"
	body, targets, aerr := s.scpAction(c, action, "ExportFormat", "ExportUse", "IncludeInExport")
	if aerr != nil {
		return aerr
	}
	format, aerr := optEnum(body, action, "ExportFormat", dell.ExportFormats, "XML")
	if aerr != nil {
		return aerr
	}
	if _, aerr := optEnum(body, action, "ExportUse", dell.ExportUses, "Default"); aerr != nil {
		return aerr
	}
	if _, aerr := optEnum(body, action, "IncludeInExport", dell.IncludeInExport, "Default"); aerr != nil {
		return aerr
	}
	t, err := s.svc.ReadConfiguration(c.m.ID)
	if err != nil {
		return s.modelError(c, err)
	}
	id := s.idOf(c.m)
	p := dell.Export(c.m, targets, id.Model, personality.ServiceTag(c.m.ID), firmwareVersion(c.m, machine.FirmwareBMC, id),
		s.hostNow().UTC().Format(time.RFC3339), nicIDs(c.m))
	var out any = p.JSON()
	if format == "XML" {
		out = p.XML()
	}
	job := &dell.Job{ID: dell.JobID(t.ID), Kind: dell.ExportJob, Task: t, Started: t.Started, Exported: out}
	s.dell.add(job)
	s.logChange(c, "configuration profile exported", zap.String("job", job.ID), zap.Strings("targets", targets))
	c.w.Header().Set("Location", dell.TaskURI(job.ID))
	c.w.WriteHeader(http.StatusAccepted)
	return nil
}

// dellTask serves GET /redfish/v1/TaskService/Tasks/JID_…: 202 and the
// Task while the job runs or waits for a boot, then 200 and the Task (an
// import) or the profile (an export). A deleted job is not found.
func (s *Server) dellTask(c *call, jid string) *apiError {
	j := s.dell.get(jid)
	if j == nil {
		return newError(http.StatusNotFound, MsgResourceNotFound, "Task", jid)
	}
	if _, aerr := s.visibleTask(c, j.Task.ID); aerr != nil {
		return aerr
	}
	st := j.Task.Status()
	if st.State == machine.TaskRunning {
		c.w.Header().Set("Location", dell.TaskURI(jid))
		s.writeJSON(c, http.StatusAccepted, j.TaskBody(managerURI(j.Task.MachineID)))
		return nil
	}
	if j.Kind == dell.ExportJob {
		if x, ok := j.Exported.(string); ok {
			h := c.w.Header()
			h["Content-Type"] = hdrXML
			c.w.WriteHeader(http.StatusOK)
			_, _ = c.w.Write([]byte(x))
			return nil
		}
		s.writeJSON(c, http.StatusOK, j.Exported)
		return nil
	}
	s.writeJSON(c, http.StatusOK, j.TaskBody(managerURI(j.Task.MachineID)))
	return nil
}

// getDellJobs is the job queue: the machine's jobs, expanded with
// $expand (sushy-oem-idrac's get_unfinished_jobs asks ?$expand=.($levels=1)).
func getDellJobs(s *Server, c *call) *apiError {
	u := managerURI(c.m.ID) + dell.JobsPath
	jobs := s.dell.of(c.m.ID)
	members := make([]any, 0, len(jobs))
	for _, j := range jobs {
		if strings.Contains(c.r.URL.RawQuery, "expand") {
			members = append(members, j.DellJob(managerURI(c.m.ID)))
		} else {
			members = append(members, ref{u + "/" + j.ID})
		}
	}
	s.writeJSON(c, http.StatusOK, obj{
		"@odata.id":           u,
		"@odata.type":         "#DellJobCollection.DellJobCollection",
		"Id":                  "JobQueue",
		"Name":                "JobQueue",
		"Description":         "Collection of Job Instances",
		"Members":             members,
		"Members@odata.count": len(members),
	})
	return nil
}

func getDellJob(s *Server, c *call) *apiError {
	j := s.dell.get(c.params[1])
	if j == nil || j.Task.MachineID != c.m.ID {
		return newError(http.StatusNotFound, MsgResourceNotFound, "DellJob", c.params[1])
	}
	s.writeJSON(c, http.StatusOK, j.DellJob(managerURI(c.m.ID)))
	return nil
}

// postDeleteJobQueue is DellJobService.DeleteJobQueue: JobID names one
// job, or JID_CLEARALL (JID_CLEARALL_FORCE) every job of the queue. A job
// that waits for a boot is cancelled and what it staged taken back
// (machine.Service.ClearJobs); every deleted job is gone from the queue
// and its Task.
func postDeleteJobQueue(s *Server, c *call) *apiError {
	const action = "DellJobService.DeleteJobQueue"
	body, aerr := actionParams(c, action, "JobID")
	if aerr != nil {
		return aerr
	}
	jid, aerr := stringParam(body, action, "JobID", true)
	if aerr != nil {
		return aerr
	}
	var drop func(*dell.Job) bool
	var n int
	var err error
	switch jid {
	case "JID_CLEARALL", "JID_CLEARALL_FORCE":
		n, err = s.svc.ClearJobs(ctx(c), c.m.ID)
		drop = func(j *dell.Job) bool { return j.Task.MachineID == c.m.ID }
	default:
		j := s.dell.get(jid)
		if j == nil || j.Task.MachineID != c.m.ID {
			return newError(http.StatusBadRequest, MsgActionParameterValueNotInList, argText(jid), "JobID", action).
				with(fmt.Sprintf("The job queue has no job %s.", truncate(jid, 32)))
		}
		n, err = s.svc.ClearJobs(ctx(c), c.m.ID, j.Task.ID)
		drop = func(d *dell.Job) bool { return d == j }
	}
	if err != nil {
		return s.modelError(c, err)
	}
	s.dell.remove(drop)
	s.logChange(c, "job queue cleared", zap.String("job", jid), zap.Int("cancelled", n))
	return s.writeSuccess(c, obj{})
}

// postLCStatus is DellLCService.GetRemoteServicesAPIStatus.
func postLCStatus(s *Server, c *call) *apiError {
	if _, aerr := actionParams(c, "DellLCService.GetRemoteServicesAPIStatus"); aerr != nil {
		return aerr
	}
	return s.writeSuccess(c, dell.LCStatus(c.m, s.inPost(c.m)))
}

// postIDRACReset is DelliDRACCardService.iDRACReset: a BMC reset
// (machine.Service.ResetBMC), as Manager.Reset is.
func postIDRACReset(s *Server, c *call) *apiError {
	const action = "DelliDRACCardService.iDRACReset"
	body, aerr := actionParams(c, action, "Force")
	if aerr != nil {
		return aerr
	}
	force, aerr := optEnum(body, action, "Force", dell.ResetForces, "Graceful")
	if aerr != nil {
		return aerr
	}
	if err := s.svc.ResetBMC(c.m.ID); err != nil {
		return s.modelError(c, err)
	}
	s.logChange(c, "BMC reset", zap.String("force", force))
	return s.writeSuccess(c, obj{})
}
