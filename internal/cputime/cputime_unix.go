//go:build unix

package cputime

import (
	"syscall"
	"time"
)

func self() time.Duration { return usage(syscall.RUSAGE_SELF) }

func children() time.Duration { return usage(syscall.RUSAGE_CHILDREN) }

// usage is getrusage(2)'s user plus system time of who.
func usage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
