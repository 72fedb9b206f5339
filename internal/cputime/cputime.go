// Package cputime reads the CPU time the process has used, for
// benchmarks that report work per CPU-second: unlike the wall clock, it
// does not grow with what else the machine runs.
package cputime

import "time"

// Self returns the CPU time (user + system, all threads) this process
// has used so far; 0 where the platform does not report it, so that a
// benchmark can omit its per-CPU-second figure there.
func Self() time.Duration { return self() }

// WithChildren returns Self plus the CPU time of the process's children
// that have ended and been waited for (a sandbox's workers, fresh
// interpreters); 0 where the platform does not report it.
func WithChildren() time.Duration { return self() + children() }
