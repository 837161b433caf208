package vbmcd

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
)

// A machine's personality and quirk switches are recorded with the machine
// (Settings.Personality and Quirks: libvirt metadata, the KubeVirt
// annotation, the sim's memory), set on a running daemon over the admin
// socket:
//
//	GET /personalities             every machine's, by name
//	PUT /personalities/{machine}   set one (personalityView's Personality, Quirks)

// personalityView is one machine's personality as the admin API shows it.
type personalityView struct {
	Machine     string `json:"machine,omitempty"`
	Name        string `json:"name,omitempty"`
	Personality string `json:"personality"`
	Quirks      string `json:"quirks"`
}

// setPersonality records a personality and quirk switches with machine id,
// after checking both.
func setPersonality(ctx context.Context, svc *machine.Service, id string, v personalityView) (personalityView, error) {
	if v.Personality != "" {
		if _, err := personality.Lookup(v.Personality); err != nil {
			return v, err
		}
	}
	if _, err := personality.ParseQuirks(v.Quirks); err != nil {
		return v, err
	}
	m, err := svc.UpdateSettings(ctx, id, func(s *machine.Settings) error {
		s.Personality, s.Quirks = v.Personality, v.Quirks
		return nil
	})
	if err != nil {
		return v, err
	}
	return personalityView{Machine: m.ID, Name: m.Name, Personality: m.Settings.Personality, Quirks: m.Settings.Quirks}, nil
}

func personalityRoutes(mux *http.ServeMux, svc *machine.Service) {
	mux.HandleFunc("GET /personalities", func(w http.ResponseWriter, _ *http.Request) {
		out := []personalityView{}
		for _, m := range svc.List() {
			out = append(out, personalityView{Machine: m.ID, Name: m.Name, Personality: m.Settings.Personality, Quirks: m.Settings.Quirks})
		}
		writeAdmin(w, http.StatusOK, out)
	})
	mux.HandleFunc("PUT /personalities/{machine}", func(w http.ResponseWriter, r *http.Request) {
		var v personalityView
		if !readAdmin(w, r, "a personality", &v) {
			return
		}
		got, err := setPersonality(r.Context(), svc, r.PathValue("machine"), v)
		answerAdmin(w, r.PathValue("machine"), got, err)
	})
}

// newPersonalityCommand is `vbmcd personality`.
func newPersonalityCommand(stateDir func() (string, error), out io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "personality",
		Short: "Make a machine's BMC look like a vendor's (Dell iDRAC, HPE iLO, Supermicro), in a running vbmcd",
		Long: `A personality shapes what clients see of a machine's BMC: Manufacturer, Model, firmware
strings, Oem blocks, where virtual media hangs and its members' ids; its quirks replay the
vendor's known misbehaviours. It is recorded with the machine (it survives a restart of vbmcd)
and set over the running daemon's admin socket (--state-dir/admin.sock). Personalities: ` +
			strings.Join(personality.Names(), ", ") + `. Quirks and their public sources: docs/personalities.md.`,
	}
	personalities := adminResource[personalityView]{
		stateDir: stateDir, out: out, path: "/personalities", header: "MACHINE\tUUID\tPERSONALITY\tQUIRKS",
		row: func(v personalityView) []string {
			return []string{v.Name, v.Machine, orDefault(v.Personality), v.Quirks}
		},
	}
	var quirks string
	set := personalities.command("set MACHINE NAME [--quirks Q]",
		"Set a machine's personality (generic, idrac9, ...; \"\" for the daemon's --personality) and quirk switches", cobra.ExactArgs(2), http.MethodPut,
		func(args []string) any { return personalityView{Personality: args[1], Quirks: quirks} })
	set.Flags().StringVar(&quirks, "quirks", "", "quirk switches, comma-separated: NAME on, -NAME off (the personality's own are on)")
	list := personalities.command("list", "List the machines' personalities", cobra.NoArgs, http.MethodGet, nil)
	c.AddCommand(set, list)
	return c
}

func orDefault(p string) string {
	if p == "" {
		return "(default)"
	}
	return p
}
