package runlock_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentrl/agentrl/runlock"
)

// A program takes its run folder's lock before any work and holds it to
// the end; a second run on the same folder fails at once, naming the
// first.
func Example() {
	base, err := os.MkdirTemp("", "runs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "grpo")

	lock, err := runlock.Acquire(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release()

	_, err = runlock.Acquire(dir) // another run, here from the same process
	var held *runlock.LockedError
	if errors.As(err, &held) {
		fmt.Println("refused; held by pid", held.Owner.PID == os.Getpid())
	}
	// Output: refused; held by pid true
}
