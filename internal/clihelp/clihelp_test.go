package clihelp_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/clihelp"
	"github.com/bmlab/bmlab/internal/labctl"
	"github.com/bmlab/bmlab/internal/vbmcd"
)

// The help texts of labctl's commands name only flags those commands have.
func TestLabctlHelpNamesOnlyExistingFlags(t *testing.T) {
	var b bytes.Buffer
	root := labctl.NewCommand(zap.NewNop(), labctl.Streams{In: strings.NewReader(""), Out: &b, ErrOut: &b})
	if bad := clihelp.Unknown(root); len(bad) > 0 {
		t.Errorf("help texts name flags that do not exist:\n%s", strings.Join(bad, "\n"))
	}
}

// The help texts of vbmcd's commands name only flags those commands have.
func TestVbmcdHelpNamesOnlyExistingFlags(t *testing.T) {
	var b bytes.Buffer
	root := vbmcd.NewCommand(vbmcd.Streams{Out: &b, ErrOut: &b}, func(string) string { return "" })
	if bad := clihelp.Unknown(root); len(bad) > 0 {
		t.Errorf("help texts name flags that do not exist:\n%s", strings.Join(bad, "\n"))
	}
}

// docs reads the named pages of docs/ as one text.
func docs(t *testing.T, pages ...string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range pages {
		data, err := os.ReadFile(filepath.Join("..", "..", "docs", p))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// docs/vbmcd.md names every flag of vbmcd and its subcommands.
func TestVbmcdFlagsDocumented(t *testing.T) {
	var b bytes.Buffer
	root := vbmcd.NewCommand(vbmcd.Streams{Out: &b, ErrOut: &b}, func(string) string { return "" })
	if missing := clihelp.Undocumented(root, docs(t, "vbmcd.md")); len(missing) > 0 {
		t.Errorf("docs/vbmcd.md does not name these flags:\n%s", strings.Join(missing, "\n"))
	}
}

// docs/labctl.md (with hybrid.md and multi-host.md) names every flag of
// labctl and its subcommands.
func TestLabctlFlagsDocumented(t *testing.T) {
	var b bytes.Buffer
	root := labctl.NewCommand(zap.NewNop(), labctl.Streams{In: strings.NewReader(""), Out: &b, ErrOut: &b})
	if missing := clihelp.Undocumented(root, docs(t, "labctl.md", "hybrid.md", "multi-host.md")); len(missing) > 0 {
		t.Errorf("docs/labctl.md does not name these flags:\n%s", strings.Join(missing, "\n"))
	}
}

// The check itself: it finds a missing flag in each kind of text, accepts a
// command's own flags, a parent's persistent flags and --help, and ignores
// dashes that do not start a flag name.
func TestUnknown(t *testing.T) {
	root := &cobra.Command{Use: "root", Long: "--verbose and --help are fine; ---- and a--b are no flags"}
	root.PersistentFlags().Bool("verbose", false, "")
	root.Flags().Bool("local", false, "only root's")
	child := &cobra.Command{
		Use:     "child [--own] [--gone]",
		Short:   "see --missing-short",
		Long:    "--verbose, --own and --local (root's, not persistent)",
		Example: "root child --x",
		Run:     func(*cobra.Command, []string) {},
	}
	child.Flags().Bool("own", false, "unlike --nothing")
	root.AddCommand(child)
	got := clihelp.Unknown(root)
	want := []string{
		`"root child": Use names --gone, which is not one of its flags`,
		`"root child": Short names --missing-short, which is not one of its flags`,
		`"root child": Long names --local, which is not one of its flags`,
		`"root child": Example names --x, which is not one of its flags`,
		`"root child": usage of --own names --nothing, which is not one of its flags`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Unknown (-want +got):\n%s", d)
	}
	// Undocumented: the text names --verbose and --own, not --local.
	got = clihelp.Undocumented(root, "root --verbose; root child --own")
	if d := cmp.Diff([]string{`"root": --local`}, got); d != "" {
		t.Errorf("Undocumented (-want +got):\n%s", d)
	}
}
