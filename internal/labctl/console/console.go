// Package console is `labctl console NODE ...`: a node's screen and
// keyboard, and its serial output, through the node's BMC alone (its
// Redfish service, from the lab's network namespace with the lab's BMC
// user and CA), so that a lab can script a firmware menu or a text UI as
// a person at the console would: take a screenshot, type keys, read the
// screen's text (OCR, Debian's tesseract-ocr) and wait until a text shows
// on the screen or the serial port. The work is internal/bmcscreen's; this
// package finds the node's BMC in the plan and prints.
package console

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/bmcscreen"
	"github.com/bmlab/bmlab/internal/lab/bmcclient"
	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/plan"
)

type flags struct {
	timeout time.Duration
	every   time.Duration
	on      string
}

// NewCommand returns `labctl console`.
func NewCommand(g *cli.Globals) *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "console NODE (screenshot FILE.png | type KEYS | text | wait-for TEXT)",
		Short: "A node's screen, keyboard and serial output through its BMC: screenshot, type, read, wait for a text",
		Long: `Work a node's console through its BMC alone (its Redfish service, as the
installer reaches it: from the lab's network namespace, with the lab's BMC
user and CA), as a person at the console would:

  screenshot FILE.png  the screen now, as a PNG (- for standard output);
                       Dell's DellLCService.ExportServerScreenShot on an
                       iDRAC personality, vbmcd's Bmlab.ExportScreenShot
                       on the others
  type KEYS            type on the keyboard (Bmlab.SendKeys): text, with
                       named keys in angle brackets: "root<Enter>",
                       "<Down><Down><Enter>", "<F2>", "<Esc>", "<Tab>",
                       "<Ctrl-Alt-Del>"; "<lt>" types a "<"
  text                 the screen's text, read by OCR (tesseract-ocr)
  wait-for TEXT        until TEXT shows on the screen (OCR) or in the
                       serial output since the node started
                       (Bmlab.ExportSerialData), or --timeout passes;
                       case, spaces and line breaks do not count

wait-for exits 0 once it finds the text and says where; at the timeout it
fails with the screen's last text and the serial output's end.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), g, f, cmd, args)
		},
	}
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Minute, "wait-for: how long to wait for the text")
	cmd.Flags().DurationVar(&f.every, "every", 500*time.Millisecond, "wait-for: how long between two looks at the screen and the serial output")
	cmd.Flags().StringVar(&f.on, "on", "any", "wait-for: where to look: screen, serial or any")
	return cmd
}

func run(ctx context.Context, g *cli.Globals, f *flags, cmd *cobra.Command, args []string) error {
	node, verb, rest := args[0], args[1], args[2:]
	want := map[string]int{"screenshot": 1, "type": 1, "text": 0, "wait-for": 1}
	n, ok := want[verb]
	if !ok {
		return fmt.Errorf("labctl console %s %s: unknown; the commands are screenshot FILE.png, type KEYS, text and wait-for TEXT", node, verb)
	}
	if len(rest) != n {
		return fmt.Errorf("labctl console %s %s takes %d argument(s), got %d", node, verb, n, len(rest))
	}
	var where bmcscreen.Where
	switch f.on {
	case "any":
		where = bmcscreen.Anywhere
	case "screen":
		where = bmcscreen.OnScreen
	case "serial":
		where = bmcscreen.OnSerial
	default:
		return fmt.Errorf("--on %q: use screen, serial or any", f.on)
	}
	var items []bmcscreen.Item
	if verb == "type" {
		var err error
		if items, err = bmcscreen.ParseSequence(rest[0]); err != nil {
			return fmt.Errorf("type %q: %w", rest[0], err)
		}
	}
	p, err := g.LoadPlan()
	if err != nil {
		return err
	}
	c, err := client(p, node)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch verb {
	case "screenshot":
		png, err := c.Screenshot(ctx)
		if err != nil {
			return err
		}
		if rest[0] == "-" {
			_, err = out.Write(png)
			return err
		}
		if err := os.WriteFile(rest[0], png, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %d bytes (the screen of %s)\n", rest[0], len(png), node)
	case "type":
		n, err := c.TypeItems(ctx, items)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "typed %d keys on %s\n", n, node)
	case "text":
		png, err := c.Screenshot(ctx)
		if err != nil {
			return err
		}
		txt, err := bmcscreen.OCRText(ctx, png)
		if err != nil {
			return err
		}
		fmt.Fprint(out, txt)
	case "wait-for":
		wctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		found, err := c.WaitFor(wctx, rest[0], bmcscreen.WaitOptions{Where: where, Every: f.every})
		var nf *bmcscreen.NotFoundError
		if errors.As(err, &nf) {
			return fmt.Errorf("%s: %w", node, err)
		}
		if err != nil {
			return err
		}
		on := "the screen"
		if found.Where == bmcscreen.OnSerial {
			on = "the serial output"
		}
		fmt.Fprintf(out, "%q is on %s of %s (after %s)\n", rest[0], on, node, found.After.Round(100*time.Millisecond))
	}
	return nil
}

// client is a bmcscreen client of node's BMC, reached as the installer
// reaches it.
func client(p *plan.Plan, node string) (*bmcscreen.Client, error) {
	var names []string
	for _, n := range p.Nodes {
		if n.Name == node {
			hc, err := bmcclient.HTTP(p)
			if err != nil {
				return nil, err
			}
			hc.Timeout = 2 * time.Minute // a screenshot, or a long key sequence typed
			return bmcscreen.New(hc, n.BMC.SystemURL, p.BMC.Username, p.BMC.Password)
		}
		names = append(names, n.Name)
	}
	return nil, fmt.Errorf("lab %q has no node %q; its nodes are %s", p.Lab, node, strings.Join(names, ", "))
}
