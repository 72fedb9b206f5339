//go:build !unix

package policy

import "time"

// cpuTime is not measured here: benchmarks then omit tokens/cpu-s.
func cpuTime() time.Duration { return 0 }
