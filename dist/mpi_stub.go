//go:build !agentrl_mpi || !cgo

package dist

import (
	"context"
	"fmt"
)

// mpiCompiled says that this binary lacks the MPI engine.
const mpiCompiled = false

// openMPI fails: this binary was built without MPI.
func openMPI(context.Context) (engine, error) {
	return nil, fmt.Errorf("%w: this binary was built without MPI (build with -tags agentrl_mpi, cgo and an MPI's development files, such as Debian's libopenmpi-dev)", ErrNotCompiled)
}
