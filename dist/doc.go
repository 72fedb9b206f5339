// Package dist runs a training program as one of N processes — one per
// GPU, across machines — started by the cluster's own launcher: torchrun,
// srun or mpirun. It gives each process its place in the job (ParseEnv,
// FromEnviron) and a communicator (Comm: all-reduce, reduce-scatter,
// all-gather, broadcast, barrier) over an existing collective engine;
// the trainers of package agentrl use it for data-parallel training
// (agentrl.DataParallel).
//
// # Launchers
//
// No launcher is ours. ParseEnv reads what each sets: torchrun's RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
// Open MPI's OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE;
// Hydra's PMI_RANK, PMI_SIZE; an srun step's SLURM_PROCID,
// SLURM_STEP_NUM_TASKS, SLURM_LOCALID; or plain RANK/WORLD_SIZE. Nested
// launchers (torchrun under srun, mpirun inside an allocation) resolve
// to the innermost; variables at the same level that disagree, or an
// incomplete set, are errors that name them. Without any, the program is
// one process and Open returns Local: the single-process path.
//
// # Engines
//
//   - NCCL, for a CUDA backend: collectives on the GPU's memory, on the
//     backend's stream (gpu.NCCL), with libnccl.so.2 opened at run time
//     as cuBLAS is (build tag agentrl_cuda; no NCCL header is needed).
//     Host buffers (metrics) are staged through device memory.
//   - MPI, for the CPU backend and for tests on machines without GPUs:
//     the MPI implementation's collectives on host memory (build tag
//     agentrl_mpi, with cgo and the implementation's development files:
//     Debian's libopenmpi-dev; pkg-config mpi-c finds them). The shim is
//     compiled against mpi.h and linked to libmpi rather than opened at
//     run time because MPI has no stable ABI (Open MPI's handles, such as
//     MPI_COMM_WORLD and MPI_FLOAT, are addresses of library objects,
//     MPICH's are integers) and a program under mpirun runs with that
//     MPI's library anyway. The default build has no MPI: Open fails with
//     ErrNotCompiled for a job of several CPU processes.
//     MPI's processes are started by an MPI launcher (mpirun, mpiexec, srun
//     --mpi=pmix): torchrun cannot start them, so a CPU job runs under
//     mpirun; Open checks that MPI sees the launcher's rank and size.
//
// Both are behind Comm; there is no collective implementation of this
// package's own. (NewGroup's ranks are goroutines of one process, for
// tests, reducing through shared memory.)
//
// # Rendezvous and the watchdog
//
// Rank 0 listens on a TCP port and every other rank connects to it once.
// The connection carries NCCL's unique id from rank 0 to the others (an
// id exchange, not a collective) and then the watchdog's messages: before
// each collective a rank sends rank 0 its sequence number. Under an MPI
// launcher (in a binary with MPI) rank 0's address, on an ephemeral
// port, reaches the others through MPI_Bcast (with the id); under
// torchrun or srun without MPI the ranks meet at MASTER_ADDR:MASTER_PORT
// (MASTER_PORT+1 under torchrun's agent store, which holds MASTER_PORT
// itself; AGENTRL_DIST_PORT overrides the port, AGENTRL_DIST_HOST the
// host rank 0 advertises under MPI). The other ranks retry until rank 0
// listens, within the timeout.
//
// Every collective has a deadline (Options.Timeout, AGENTRL_DIST_TIMEOUT,
// 10 minutes by default). When it passes, rank 0 names the ranks whose
// sequence number has not reached the collective, and the other ranks
// ask rank 0 and name them too: "dist: all-reduce #7 on rank 0: rank 1
// did not arrive within 2s". A rank whose process ends closes its
// connection without a goodbye, and every other rank's collective fails
// at once naming it, without waiting for the timeout. A timed-out
// collective cannot be taken back (MPI has no cancel; NCCL's is
// ncclCommAbort, which Open's NCCL communicator calls): the communicator
// is broken, and the program should exit with the error, upon which its
// launcher ends the other processes (mpirun and torchrun do when one
// exits non-zero). Under mpirun a rank that dies also makes mpirun end
// the job, naming it.
//
// # What a step costs
//
// Data-parallel training all-reduces the gradients once per optimizer
// update: 4·P bytes per rank for P trained float32 parameters, plus a
// few hundred bytes of metrics per step. A ring or tree all-reduce moves
// about 2·(N−1)/N·4·P bytes per rank on the wire, so on a link of
// bandwidth B the update costs t ≈ 2·(N−1)/N·4P/B + latency per bucket;
// see docs/benchmarks.md for measurements.
package dist
