//go:build !unix

package gemm

import "time"

// cpuTime is unavailable here; benchmarks then omit GFLOP/cpu-s.
func cpuTime() time.Duration { return 0 }
