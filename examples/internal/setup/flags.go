package setup

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// NewFlagSet returns the flag set of the program called name. -h (or
// -help) prints "usage: " and synopsis, then every flag with its default,
// on stderr; a bad flag prints nothing there: Parse returns it, and Run
// prints it first, then a pointer to -h.
func NewFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args with fs (from NewFlagSet). After -h it has printed
// the usage and returns flag.ErrHelp; a bad flag or value comes back as
// the flag package's error, with nothing printed.
func Parse(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
	}
	return err
}

// HelpPointer is the line Run prints after a usage error of the program
// called name.
func HelpPointer(name string) string {
	return fmt.Sprintf("run '%s -h' for the usage and every flag", name)
}
