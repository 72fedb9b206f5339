package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/dist"
)

// Job is a program's place in a data-parallel job (package dist): its
// communicator and launcher environment. Without a launcher it is the
// one process of a job of one, and every method leaves the program as
// it is.
type Job struct {
	// Comm connects the ranks; dist.Local when the program runs alone.
	Comm dist.Comm
	// Env is where this process stands (dist.FromEnviron).
	Env dist.Env
	// ZeRO is the trainers' sharding stage (DataParallel.ZeRO; the
	// programs' -zero flag, ZeROFlag).
	ZeRO int
	// ZeROBF16Weights keeps the trained weights in bf16 with their
	// float32 master sharded (DataParallel.ZeROBF16Weights; the
	// programs' -zero-bf16 flag, ZeROBF16Flag).
	ZeROBF16Weights bool

	scratch string // the folder Dir gives ranks other than 0
}

// JoinJob joins the job that the launcher (torchrun, srun, mpirun)
// started this program in: the communicator over dev's backend
// (dist.Open: NCCL for a GPU, MPI for the CPU), announced on stderr by
// rank 0. Without a launcher it returns the single process's Job at
// once. Close it after training, before the device.
func JoinJob(ctx context.Context, dev *device.Device, stderr io.Writer) (*Job, error) {
	env, err := dist.FromEnviron()
	if err != nil {
		return nil, err
	}
	comm, err := dist.Open(ctx, dist.Options{Env: &env, Backend: dev.Backend()})
	if err != nil {
		return nil, fmt.Errorf("joining the job (%v): %w", env, err)
	}
	j := &Job{Comm: comm, Env: env}
	if env.Distributed() && env.Leader() {
		fmt.Fprintf(stderr, "job: %d ranks (%s); rank 0 writes the outputs\n", env.Size, env.Launcher)
	}
	return j, nil
}

// DataParallel is the trainers' setting for the job
// (TrainerParts.DataParallel, SFTParts.DataParallel).
func (j *Job) DataParallel() agentrl.DataParallel {
	return agentrl.DataParallel{Comm: j.Comm, ZeRO: j.ZeRO, ZeROBF16Weights: j.ZeROBF16Weights}
}

// Leader reports whether this is rank 0, which prints and writes the
// job's outputs.
func (j *Job) Leader() bool { return j.Comm.Rank() == 0 }

// Output returns stdout and stderr on rank 0 and io.Discard for both on
// the other ranks: the job prints its results and progress once. A
// rank's failure still reaches the terminal: Run prints the error the
// program returns on the stderr it was given.
func (j *Job) Output(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if j.Leader() {
		return stdout, stderr
	}
	return io.Discard, io.Discard
}

// Dir is dir on rank 0 and, on the other ranks, a private scratch
// folder (removed by Close) for the files that rank 0 alone writes —
// plots, exported models, logs — so that no two ranks write one file.
// The trainers write their checkpoints and metrics from rank 0 only
// whatever the folder.
func (j *Job) Dir(dir string) (string, error) {
	if j.Leader() {
		return dir, nil
	}
	if j.scratch == "" {
		s, err := os.MkdirTemp("", fmt.Sprintf("agentrl-rank%d-", j.Comm.Rank()))
		if err != nil {
			return "", err
		}
		j.scratch = s
	}
	return j.scratch, nil
}

// Close closes the communicator and removes the scratch folder.
func (j *Job) Close() error {
	err := j.Comm.Close()
	if j.scratch != "" {
		err = errors.Join(err, os.RemoveAll(j.scratch))
	}
	return err
}
