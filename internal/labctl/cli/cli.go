// Package cli holds what every labctl subcommand shares: the I/O streams,
// the logger and the global flags. It exists so that subcommand packages need
// not import the root command.
package cli

import (
	"io"

	"go.uber.org/zap"
)

// Streams are the command's standard streams. What people read goes to Out;
// logs go to the logger, never to Out.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Globals are the values of the root command's flags and what main passes in.
// Subcommands read them when they run, after flags are parsed.
type Globals struct {
	Logger  *zap.Logger
	Streams Streams
	// ConfigPath is the lab configuration file; ConfigSet says whether the
	// user named it (then it must exist).
	ConfigPath string
	ConfigSet  bool
}
