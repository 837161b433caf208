package dell

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
)

// Jobs. An import or an export of a profile is a job of the Lifecycle
// Controller: POST answers 202 with Location /redfish/v1/TaskService/Tasks/
// JID_…, whose GET answers 202 with the Task while the job runs and 200
// when it is done (Dell's ExportSystemConfigurationLocalREDFISH.py polls it
// so; sushy's TaskMonitor reads 202 as processing); the same job is a
// DellJob under the Manager's Oem/Dell/Jobs. A finished export's Task URI
// answers the profile itself. Every task of the machine model that is a
// Dell job keeps its id: JID_ and the task id in twelve digits.

// JobID is the Dell job id of a machine task id.
func JobID(taskID string) string {
	n, err := strconv.ParseUint(taskID, 10, 64)
	if err != nil {
		return "JID_" + taskID
	}
	return fmt.Sprintf("JID_%012d", n)
}

// TaskID is the machine task id of a Dell job id; false when id is not one.
func TaskID(jobID string) (string, bool) {
	digits, ok := strings.CutPrefix(jobID, "JID_")
	if !ok || digits == "" || len(digits) > 12 {
		return "", false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatUint(n, 10), true
}

// JobKind says what a job does.
type JobKind string

// The jobs vbmcd's iDRAC runs.
const (
	ImportJob JobKind = "ImportConfiguration"
	ExportJob JobKind = "ExportConfiguration"
)

// Job is one import or export and what the face keeps of it.
type Job struct {
	ID      string // JID_…
	Kind    JobKind
	Task    *machine.Task
	Started time.Time
	// Outcomes are an import's attributes; Exported is an export's
	// profile, in the format it asked for.
	Outcomes []Outcome
	Exported any
	// Taken says an import took at least one attribute.
	Taken bool
}

// Message ids. SYS053 (applied) and SYS069 (no changes) are Dell's, as
// Dell's openmanage modules read them; Ironic 29's drac management counts a
// message whose id names SYS055 as a failed import, and vbmcd marks each
// refused attribute so. TaskStarted and Success are the DMTF's (Task Event
// and Base registries).
const (
	msgApplied   = "IDRAC.2.9.SYS053"
	msgNoChanges = "IDRAC.2.9.SYS069"
	msgRefused   = "IDRAC.2.9.SYS055"
	msgStarted   = "TaskEvent.1.0.TaskStarted"
	msgSuccess   = "Base.1.16.0.Success"
)

type obj = map[string]any

type jobState struct {
	taskState, health, jobState string
	percent                     int
	message, messageID          string
	ended                       time.Time
}

func (j *Job) state() jobState {
	st := j.Task.Status()
	s := jobState{taskState: string(st.State), health: "OK", percent: st.Percent, ended: st.Ended}
	refused := 0
	for _, o := range j.Outcomes {
		if o.Err != "" {
			refused++
		}
	}
	switch {
	case st.State == machine.TaskRunning && st.Awaiting:
		s.jobState, s.messageID = "Scheduled", msgStarted
		s.message = "The job is scheduled: the settings take effect at the server's next boot."
	case st.State == machine.TaskRunning:
		s.jobState, s.messageID = "Running", msgStarted
		s.message = "The job is running."
	case st.State != machine.TaskCompleted:
		s.jobState, s.health, s.messageID = "Failed", "Critical", msgRefused
		s.message = "Unable to complete application of configuration profile values."
		if st.Err != nil {
			s.message += " " + st.Err.Error()
		}
	case j.Kind == ExportJob:
		s.jobState, s.messageID, s.message = "Completed", msgSuccess, "Successfully exported Server Configuration Profile."
	case refused > 0 && !j.Taken:
		s.taskState, s.jobState, s.health, s.messageID = string(machine.TaskException), "Failed", "Critical", msgRefused
		s.message = "Unable to complete application of configuration profile values."
	case refused > 0:
		s.jobState, s.health, s.messageID = "CompletedWithErrors", "Warning", msgRefused
		s.message = "Import of Server Configuration Profile operation completed with errors."
	case len(j.Task.Config.Changed) == 0:
		s.jobState, s.messageID = "Completed", msgNoChanges
		s.message = "No changes were applied since the current component configuration matched the requested configuration."
	default:
		s.jobState, s.messageID, s.message = "Completed", msgApplied, "Successfully imported and applied Server Configuration Profile."
	}
	return s
}

func (j *Job) name() string {
	if j.Kind == ExportJob {
		return "Export Configuration"
	}
	return "Import Configuration"
}

// DellJob is the job as the Manager's Oem/Dell/Jobs lists it
// (#DellJob.DellJob: JobState, JobType, Message, MessageId, PercentComplete,
// which sushy-oem-idrac's job collection reads).
func (j *Job) DellJob(managerURI string) obj {
	s := j.state()
	var completed any
	if !s.ended.IsZero() {
		completed = s.ended.UTC().Format("2006-01-02T15:04:05")
	}
	return obj{
		"@odata.id":         managerURI + "/Oem/Dell/Jobs/" + j.ID,
		"@odata.type":       "#DellJob.v1_5_0.DellJob",
		"Id":                j.ID,
		"Name":              j.name(),
		"Description":       "Job Instance",
		"JobType":           string(j.Kind),
		"JobState":          s.jobState,
		"Message":           s.message,
		"MessageId":         s.messageID,
		"MessageArgs":       []string{},
		"PercentComplete":   s.percent,
		"StartTime":         "TIME_NOW",
		"EndTime":           "TIME_NA",
		"CompletionTime":    completed,
		"TargetSettingsURI": nil,
	}
}

// TaskURI is where the job's Task is, which is also its task monitor.
func TaskURI(jobID string) string { return "/redfish/v1/TaskService/Tasks/" + jobID }

// TaskBody is the job as a Task: TaskState, TaskStatus and Messages, which
// Ironic 29's drac management reads to judge an import, and the DellJob
// under Oem.Dell.
func (j *Job) TaskBody(managerURI string) obj {
	s := j.state()
	msgs := []obj{{"MessageId": s.messageID, "Message": s.message, "MessageArgs": []string{}, "Severity": severity(s.health)}}
	if s.messageID == msgStarted {
		msgs[0]["MessageArgs"] = []string{j.ID}
	}
	for _, o := range j.Outcomes {
		if o.Err == "" {
			continue
		}
		msgs = append(msgs, obj{
			"MessageId":   msgRefused,
			"Message":     fmt.Sprintf("The attribute %s of %s was not applied: %s.", o.Attribute, o.Component, strings.TrimSuffix(o.Err, ".")),
			"MessageArgs": []string{o.Attribute, o.Component},
			"Severity":    "Critical",
			"Oem": obj{"Dell": obj{
				"Name": o.Attribute, "FQDD": o.Component, "NewValue": o.Value, "Status": "Failure",
			}},
		})
	}
	o := obj{
		"@odata.id":       TaskURI(j.ID),
		"@odata.type":     "#Task.v1_5_1.Task",
		"Id":              j.ID,
		"Name":            j.name(),
		"Description":     "Server Configuration and other Tasks running on iDRAC are listed here",
		"TaskState":       s.taskState,
		"TaskStatus":      s.health,
		"PercentComplete": s.percent,
		"StartTime":       j.Started.UTC().Format(time.RFC3339),
		"Messages":        msgs,
		"Oem":             obj{"Dell": j.DellJob(managerURI)},
	}
	if !s.ended.IsZero() {
		o["EndTime"] = s.ended.UTC().Format(time.RFC3339)
	}
	return o
}

func severity(health string) string {
	if health == "Critical" {
		return "Critical"
	}
	if health == "Warning" {
		return "Warning"
	}
	return "OK"
}
