// Package clihelp checks a cobra command tree's help texts: every `--flag`
// that a command's Use, Short, Long or Example text, or one of its flags' usage
// lines, names must be a flag of that command or a persistent flag of one of
// its parents. Its tests run the check over labctl's and vbmcd's trees, so a
// help text cannot point users to a flag that does not exist.
//
// It only reads the tree; it neither runs nor changes a command.
package clihelp
