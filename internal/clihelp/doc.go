// Package clihelp checks a cobra command tree's help texts: every `--flag`
// that a command's Use, Short, Long or Example text, or one of its flags' usage
// lines, names must be a flag of that command or a persistent flag of one of
// its parents. Its tests run the check over labctl's and vbmcd's trees, so a
// help text cannot point users to a flag that does not exist; they also
// check that docs/labctl.md and docs/vbmcd.md name every flag, and that the
// README and docs/ name only repository paths and link only to pages that
// exist.
//
// It only reads the tree; it neither runs nor changes a command.
package clihelp
