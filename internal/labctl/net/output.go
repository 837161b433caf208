package net

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/plan"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printRows(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBJECT\tDIFFERENCE\tWANT\tGOT\tFIX")
	for _, r := range rows {
		kind := r.Kind
		if r.Blocking {
			kind += " (blocking)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Object, kind, dash(r.Want), dash(r.Got), r.Fix)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func zapFields(p *plan.Plan, f *flags) []zap.Field {
	return []zap.Field{zap.String("lab", p.Lab), zap.String("netns", p.Netns), zap.Bool("libvirt", !f.noLibvirt)}
}
