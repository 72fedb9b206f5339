//go:build agentrl_mpi && cgo

package dist

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkMPIAllReduce all-reduces float32 buffers of several sizes
// (a small bucket, examples/arith's 0.46M parameters, DDP's 25 MiB
// bucket, 100 MiB) across the ranks, and reports the algorithm bandwidth
// (bytes/time) and NCCL's bus bandwidth (algbw·2(N−1)/N, the figure
// nccl-tests print). Every rank must run the same number of iterations,
// so give a fixed count:
//
//	mpirun -np 2 dist.test -test.run '^$' -test.bench MPIAllReduce -test.benchtime 50x
func BenchmarkMPIAllReduce(b *testing.B) {
	if mpiComm == nil {
		b.Skip("not under an MPI launcher")
	}
	ctx := context.Background()
	n := mpiComm.Size()
	for _, size := range []int{4 << 10, 1843200, 25 << 20, 100 << 20} {
		buf := make(Float32s, size/4)
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			if err := mpiComm.Barrier(ctx); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				if err := mpiComm.AllReduce(ctx, buf, Sum); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			alg := float64(size) / sec / 1e9
			b.ReportMetric(sec*1e6, "µs/allreduce")
			b.ReportMetric(alg, "algGB/s")
			b.ReportMetric(alg*2*float64(n-1)/float64(n), "busGB/s")
		})
	}
}
