package setup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// Run is a program's whole life after main: it parses args with parse
// and runs body, and returns the exit status — 0 on success or after -h,
// 2 for bad flags, 1 when body fails. Errors are printed to stderr as
// "name: error", marked as interrupted when ctx ended first; a usage
// error (any error of parse) is followed by one line that points to -h
// (HelpPointer), and by nothing else.
func Run[O any](ctx context.Context, name string, args []string, stdout, stderr io.Writer,
	parse func([]string, io.Writer) (O, error), body func(context.Context, O, io.Writer, io.Writer) error) int {
	o, err := parse(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n%s\n", name, err, HelpPointer(name))
		return 2
	}
	if err := body(ctx, o, stdout, stderr); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// Main runs run with the command line and a context that ends on
// SIGINT or SIGTERM, and exits with its status. With AGENTRL_CPUPROFILE
// set to a file name, the whole run is CPU-profiled into it (runtime/pprof;
// read it with go tool pprof).
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfile, err := startProfile(os.Getenv("AGENTRL_CPUPROFILE"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "AGENTRL_CPUPROFILE: %v\n", err)
		os.Exit(2)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err := stopProfile(); err != nil {
		fmt.Fprintf(os.Stderr, "AGENTRL_CPUPROFILE: %v\n", err)
		code = max(code, 1)
	}
	stop()
	os.Exit(code)
}

// startProfile starts a CPU profile into the file path names, and
// returns the function that ends it; with path empty it does nothing.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
