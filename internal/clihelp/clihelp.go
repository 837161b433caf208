package clihelp

import (
	"fmt"
	"regexp"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagRef is a long flag as help texts write it: two dashes at the start of a
// word, then a lower-case name (not a "---" rule, not part of "a--b").
var flagRef = regexp.MustCompile(`(?:^|[^\w-])--([a-z0-9][a-z0-9-]*[a-z0-9]|[a-z0-9])`)

// Unknown returns, for root and every command under it, each `--name` that a
// help text of that command (Use, Short, Long, Example, a flag's usage)
// mentions and that is neither a flag of the
// command nor a persistent flag of a parent. Each entry says the command,
// the text it was found in and the flag, in the tree's order.
func Unknown(root *cobra.Command) []string {
	var out []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag() // cobra adds --help when it runs a command
		texts := []struct{ where, text string }{
			{"Use", c.Use}, {"Short", c.Short}, {"Long", c.Long}, {"Example", c.Example},
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			texts = append(texts, struct{ where, text string }{"usage of --" + f.Name, f.Usage})
		})
		for _, t := range texts {
			for _, m := range flagRef.FindAllStringSubmatch(t.text, -1) {
				if !defined(c, m[1]) {
					out = append(out, fmt.Sprintf("%q: %s names --%s, which is not one of its flags", c.CommandPath(), t.where, m[1]))
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// defined reports whether name is a flag of c or a persistent flag of one of
// its parents.
func defined(c *cobra.Command, name string) bool {
	if c.Flags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
		return true
	}
	for p := c.Parent(); p != nil; p = p.Parent() {
		if p.PersistentFlags().Lookup(name) != nil {
			return true
		}
	}
	return false
}

// Undocumented returns, for root and every command under it, each flag of
// the command's own (not inherited, not hidden, not --help) whose `--name` the text does
// not mention: what a reference page that should list every flag misses.
func Undocumented(root *cobra.Command, text string) []string {
	named := map[string]bool{}
	for _, m := range flagRef.FindAllStringSubmatch(text, -1) {
		named[m[1]] = true
	}
	var out []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && !f.Hidden && !named[f.Name] {
				out = append(out, fmt.Sprintf("%q: --%s", c.CommandPath(), f.Name))
			}
		})
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && !named[f.Name] {
				out = append(out, fmt.Sprintf("%q: --%s", c.CommandPath(), f.Name))
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}
