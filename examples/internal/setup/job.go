package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/policy"
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
	return agentrl.DataParallel{Comm: j.Comm, ZeRO: j.ZeRO}
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

// deviceForRank is the device a rank of a job opens: under a launcher
// that runs several ranks on a machine, "-device cuda" (cuda:0) and
// "-device auto" mean cuda:LOCAL_RANK, modulo the devices that
// CUDA_VISIBLE_DEVICES lists when it is set (a launcher that gives each
// rank its own GPU lists one). It returns dc unchanged for a rank 0, an
// explicit cuda:N with N > 0, cpu, or a program run alone.
func deviceForRank(dc device.Config, env dist.Env) device.Config {
	if !env.Distributed() || env.LocalRank == 0 || dc.Device.Kind == device.CPU || dc.Device.Ordinal != 0 {
		return dc
	}
	ord := env.LocalRank
	if v := strings.TrimSpace(os.Getenv("CUDA_VISIBLE_DEVICES")); v != "" {
		ord %= len(strings.Split(v, ","))
	}
	dc.Device = device.Spec{Kind: device.CUDA, Ordinal: ord}
	return dc
}

// openForRank is device.Open for this rank of the job (deviceForRank);
// "-device auto" that cannot open the rank's GPU opens the CPU, saying
// why.
func openForRank(ctx context.Context, dc device.Config, mc policy.Config, stderr io.Writer) (*device.Device, error) {
	env, err := dist.FromEnviron()
	if err != nil {
		return nil, err
	}
	rc := deviceForRank(dc, env)
	if rc == dc {
		return device.Open(ctx, dc, mc)
	}
	d, err := device.Open(ctx, rc, mc)
	if err == nil || dc.Device.Kind != device.Auto {
		return d, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	fmt.Fprintf(stderr, "device: auto: rank %d's %v: %v\n", env.Rank, rc.Device, err)
	return device.Open(ctx, device.Config{Device: device.Spec{Kind: device.CPU}, Precision: device.FP32}, mc)
}
