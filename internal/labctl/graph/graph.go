// Package graph is `labctl graph`: a picture of the lab, drawn from its plan
// and what is really on the host (internal/lab/steps' Graph), as Graphviz DOT,
// or SVG or PNG through Graphviz's dot.
package graph

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/labctl/cli"
)

// NewCommand returns `labctl graph`.
func NewCommand(g *cli.Globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "Draw the lab: bridges, veths, NAT network, VXLAN links, nodes with their power, and their BMCs",
		Long: `Draw the lab from its plan and what is really on the host: the bridges and
the lab's NAT network, the veths between them, VXLAN links to other hosts,
every node with its role, MAC, IP and power, and vbmcd with each node's BMC.
What 'labctl net check' finds missing or different is drawn dashed in red,
with what it says; a node whose domain is absent too.

-o FILE picks the format by its extension: .dot (Graphviz's language),
.svg or .png (drawn by Graphviz's dot, from Debian's graphviz package).
Without -o the DOT text goes to standard output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format := strings.TrimPrefix(filepath.Ext(out), ".")
			switch format {
			case "", "dot", "svg", "png":
			default:
				return fmt.Errorf("-o %s: the format follows the extension: .dot, .svg or .png", out)
			}
			l, err := g.Open(cmd.Context(), cli.Open{})
			if err != nil {
				return err
			}
			defer l.Close()
			dot, err := steps.Graph(cmd.Context(), l.Env)
			if err != nil {
				return err
			}
			data := []byte(dot)
			if format == "svg" || format == "png" {
				bin, err := exec.LookPath("dot")
				if err != nil {
					return fmt.Errorf("-o %s needs Graphviz's dot (apt-get install graphviz), or write .dot", out)
				}
				c := exec.CommandContext(cmd.Context(), bin, "-T"+format)
				c.Stdin = strings.NewReader(dot)
				var stdout, stderr bytes.Buffer
				c.Stdout, c.Stderr = &stdout, &stderr
				if err := c.Run(); err != nil {
					return fmt.Errorf("dot -T%s: %v: %s", format, err, stderr.String())
				}
				data = stdout.Bytes()
			}
			if out == "" {
				_, err := g.Streams.Out.Write(data)
				return err
			}
			if err := os.WriteFile(out, data, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(g.Streams.Out, "✓ wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file: .dot, .svg or .png")
	return cmd
}
