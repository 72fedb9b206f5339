package setup

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/agentrl/agentrl"
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

// ZeROFlag registers -zero on fs, into stage: the sharding of a
// data-parallel job's training state (agentrl.DataParallel.ZeRO), 0, 1
// or 2; any other value is a usage error.
func ZeROFlag(fs *flag.FlagSet, stage *int) {
	fs.Func("zero", "in a data-parallel job, shard the training state over the ranks (ZeRO): 1 the optimizer state, 2 the gradients too; 0 shards nothing (default 0)", func(s string) error {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > agentrl.ShardGradients {
			return fmt.Errorf("%q: want 0, 1 or 2", s)
		}
		*stage = v
		return nil
	})
}

// ZeROBF16Flag registers -zero-bf16 on fs, into on: with -zero, the
// trained weights in bf16 only and their float32 master sharded
// (agentrl.DataParallel.ZeROBF16Weights).
func ZeROBF16Flag(fs *flag.FlagSet, on *bool) {
	fs.BoolVar(on, "zero-bf16", false, "with -zero, keep the trained weights in bf16 only (2 bytes a parameter) and shard their float32 master copy with the optimizer state (a GPU in bf16 precision)")
}

// HelpPointer is the line Run prints after a usage error of the program
// called name.
func HelpPointer(name string) string {
	return fmt.Sprintf("run '%s -h' for the usage and every flag", name)
}
