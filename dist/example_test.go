package dist_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentrl/agentrl/dist"
)

// A process started by mpirun -np 2 reads its place in the job from the
// variables Open MPI sets.
func ExampleParseEnv() {
	vars := map[string]string{
		"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
		"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
	}
	env, err := dist.ParseEnv(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(env)
	// Output: rank 1 of 2 (local 1), openmpi
}

// Open without a launcher is the single-process path: one rank, whose
// collectives leave its data as it is.
func ExampleOpen() {
	ctx := context.Background()
	comm, err := dist.Open(ctx, dist.Options{Env: &dist.Env{Launcher: dist.Alone, Size: 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer comm.Close()
	grads := dist.Float32s{0.5, -1}
	_ = comm.AllReduce(ctx, grads, dist.Sum)
	fmt.Println(comm.Rank(), comm.Size(), grads)
	// Output: 0 1 [0.5 -1]
}

// Three ranks as goroutines sum their gradients.
func ExampleNewGroup() {
	ctx := context.Background()
	comms, err := dist.NewGroup(ctx, 3, dist.GroupOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	out := make([]dist.Float32s, 3)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[r] = dist.Float32s{float32(r), 1}
			_ = c.AllReduce(ctx, out[r], dist.Sum)
		}()
	}
	wg.Wait()
	for _, c := range comms {
		_ = c.Close()
	}
	fmt.Println(out[0], out[2])
	// Output: [3 3] [3 3]
}
