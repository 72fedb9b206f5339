package setup

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
)

// The values of the -fleet-version flag besides a version number.
const (
	// FleetStart expects the servers to hold the version the run starts
	// from: 0, the weights they were started with, for a new run. A run
	// resumed from a checkpoint adopts theirs, whatever it is, as it
	// publishes the checkpoint's weights before anything samples.
	FleetStart = "start"
	// FleetAdopt takes the version the servers report (they must agree),
	// and samples their weights until the run's first publication.
	FleetAdopt = "adopt"
	// FleetReset checks no version and publishes the weights the run
	// starts from to the servers, as its starting version, before
	// anything samples them.
	FleetReset = "reset"
)

// FleetVersion is the -fleet-version flag (a flag.Value) of the programs
// that train against running servers: what the servers hold when the
// run starts, "start" (the zero value), "adopt", "reset" or a version
// number.
type FleetVersion struct {
	mode string // FleetStart ("" too), FleetAdopt, FleetReset, or "" with n
	n    int
	set  bool // n was given
}

// FleetVersionUsage is the flag's usage text.
const FleetVersionUsage = `weight version the -fleet-servers hold at the start: "start" (0, the weights they were started with, for a new run; a resumed run takes theirs), "adopt" (take the number they report: a server keeps the last weights it loaded, the previous run's last version), "reset" (publish this run's starting weights to them first, whatever they hold), or a number`

// String returns the flag's value.
func (v *FleetVersion) String() string {
	switch {
	case v == nil:
		return FleetStart
	case v.set:
		return strconv.Itoa(v.n)
	case v.mode == "":
		return FleetStart
	}
	return v.mode
}

// Set parses the flag's value.
func (v *FleetVersion) Set(s string) error {
	switch s {
	case FleetStart, FleetAdopt, FleetReset:
		*v = FleetVersion{mode: s}
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want start, adopt, reset or a version number ≥ 0")
	}
	*v = FleetVersion{n: n, set: true}
	return nil
}

// Default reports whether the flag says "start", its default.
func (v FleetVersion) Default() bool { return !v.set && (v.mode == "" || v.mode == FleetStart) }

// Configure sets c's Version and AdoptVersion for a run that resumes
// from a checkpoint (resumed) or starts anew.
func (v FleetVersion) Configure(c *fleet.Config, resumed bool) {
	switch {
	case v.set:
		c.Version = v.n
	case v.mode == FleetAdopt, v.mode == FleetReset, resumed:
		c.AdoptVersion = true
	}
}

// Check runs f.Check, which fails on servers that hold another version
// than the flag says; the error then tells what the flag's other values
// do. With "reset" the versions are not checked: servers that disagree
// get the run's weights before anything samples them (Reset).
func (v FleetVersion) Check(ctx context.Context, f *fleet.Fleet) error {
	err := f.Check(ctx)
	switch {
	case err == nil:
		return nil
	case v.mode == FleetReset && errors.Is(err, fleet.ErrVersion):
		return nil
	case errors.Is(err, fleet.ErrVersion):
		return fmt.Errorf("%w (-fleet-version %s; -fleet-version adopt takes the servers' number, reset publishes this run's starting weights to them first)", err, v.String())
	}
	return err
}

// Describe says which version the servers of f hold for a run starting
// at step start (resumed: from a checkpoint), after Check.
func (v FleetVersion) Describe(f *fleet.Fleet, start int, resumed bool) string {
	switch {
	case v.set:
		return fmt.Sprintf("they hold version %d (-fleet-version %d)", f.Version(), v.n)
	case v.mode == FleetReset && !resumed:
		return fmt.Sprintf("they get this run's starting weights as version %d before anything samples them (-fleet-version reset)", start)
	case resumed:
		return fmt.Sprintf("they hold version %d, taken as it is: the run resumes from step %d and publishes that checkpoint's weights to them before its first rollout", f.Version(), start)
	case v.mode == FleetAdopt:
		return fmt.Sprintf("they hold version %d, taken as it is (-fleet-version adopt): the run samples their weights until it publishes its own as version %d before its first step", f.Version(), start)
	}
	return fmt.Sprintf("they hold version %d, the weights they were started with", f.Version())
}

// Reset publishes w, the weights a new run starts from, to the servers
// of f as version 0 when the flag says "reset"; it does nothing for a
// resumed run, whose trainer publishes the checkpoint's weights before
// its first rollout, or on ranks other than 0 (leader false).
func (v FleetVersion) Reset(ctx context.Context, f *fleet.Fleet, w lm.Saver, resumed, leader bool) error {
	if v.mode != FleetReset || resumed || !leader || f == nil {
		return nil
	}
	if err := f.Publish(ctx, 0, w); err != nil {
		return fmt.Errorf("-fleet-version reset: %w", err)
	}
	return nil
}
