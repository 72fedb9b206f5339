//go:build !unix

package cputime

import "time"

func self() time.Duration { return 0 }

func children() time.Duration { return 0 }
