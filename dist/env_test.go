package dist

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lookupOf is a lookup over a fixed environment.
func lookupOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// The variables below are those each launcher sets (torchrun's
// torch/distributed/elastic/agent/server/local_elastic_agent.py, Open
// MPI's mpirun(1) "Exported environment variables", srun(1) "OUTPUT
// ENVIRONMENT VARIABLES", Hydra's PMI_RANK/PMI_SIZE/MPI_LOCALRANKID);
// each case's expected Env is read off them by hand.
func TestParseEnv(t *testing.T) {
	torchrun := map[string]string{
		"TORCHELASTIC_RUN_ID": "job", "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
		"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True",
	}
	openmpi := map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "<unset>" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		vars    map[string]string
		want    Env
		wantErr string // a substring of the error; "" for none
	}{
		{name: "no launcher", vars: map[string]string{"PATH": "/bin"}, want: Env{Launcher: Alone, Size: 1}},
		{name: "torchrun", vars: torchrun, want: Env{Launcher: Torchrun, Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, MasterAddr: "node0", MasterPort: 29500, AgentStore: true}},
		{name: "torchrun inside srun: torchrun's ranks count", vars: with(torchrun, "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_LOCALID", "0"),
			want: Env{Launcher: Torchrun, Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, MasterAddr: "node0", MasterPort: 29500, AgentStore: true}},
		{name: "torchrun without LOCAL_RANK", vars: with(torchrun, "LOCAL_RANK", "<unset>"), wantErr: "LOCAL_RANK is missing"},
		{name: "torchrun without WORLD_SIZE", vars: with(torchrun, "WORLD_SIZE", "<unset>"), wantErr: "WORLD_SIZE is missing"},
		{name: "open mpi", vars: openmpi, want: Env{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2}},
		{name: "open mpi inside a slurm step (mpirun's daemons)", vars: with(openmpi, "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_LOCALID", "0"),
			want: Env{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2}},
		{name: "open mpi and a stale RANK disagree", vars: with(openmpi, "RANK", "0", "WORLD_SIZE", "2"), wantErr: "disagree"},
		{name: "open mpi and RANK agree", vars: with(openmpi, "RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "1234"),
			want: Env{Launcher: OpenMPI, Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, MasterAddr: "10.0.0.1", MasterPort: 1234}},
		{name: "open mpi without its size", vars: with(openmpi, "OMPI_COMM_WORLD_SIZE", "<unset>"), wantErr: "OMPI_COMM_WORLD_SIZE is missing"},
		{name: "hydra", vars: map[string]string{"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1"},
			want: Env{Launcher: PMI, Rank: 2, Size: 3, LocalRank: 0, LocalSize: 1}},
		{name: "hydra and open mpi disagree", vars: with(openmpi, "PMI_RANK", "0", "PMI_SIZE", "2"), wantErr: "disagree"},
		{name: "srun step", vars: map[string]string{"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8"},
			want: Env{Launcher: Slurm, Rank: 5, Size: 8, LocalRank: 1}},
		{name: "sbatch script, no step: one process", vars: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "7"}, want: Env{Launcher: Alone, Size: 1}},
		{name: "srun step without SLURM_PROCID", vars: map[string]string{"SLURM_STEP_NUM_TASKS": "8"}, wantErr: "SLURM_PROCID is missing"},
		{name: "plain RANK/WORLD_SIZE", vars: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, want: Env{Launcher: Variables, Rank: 0, Size: 2}},
		{name: "plain RANK without LOCAL_RANK", vars: map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, wantErr: "LOCAL_RANK is not"},
		{name: "plain world of one", vars: map[string]string{"RANK": "0", "WORLD_SIZE": "1"}, want: Env{Launcher: Variables, Size: 1, LocalSize: 1}},
		{name: "RANK without WORLD_SIZE", vars: map[string]string{"RANK": "0"}, wantErr: "WORLD_SIZE is missing"},
		{name: "rank not below size", vars: map[string]string{"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, wantErr: "RANK=2 is not below WORLD_SIZE=2"},
		{name: "size zero", vars: map[string]string{"RANK": "0", "WORLD_SIZE": "0"}, wantErr: "at least one process"},
		{name: "negative rank", vars: map[string]string{"RANK": "-1", "WORLD_SIZE": "2"}, wantErr: `RANK="-1" is not a number`},
		{name: "rank with a sign", vars: map[string]string{"RANK": "+1", "WORLD_SIZE": "2"}, wantErr: `RANK="+1"`},
		{name: "rank not a number", vars: map[string]string{"RANK": "one", "WORLD_SIZE": "2"}, wantErr: `RANK="one"`},
		{name: "huge size", vars: map[string]string{"RANK": "0", "WORLD_SIZE": "99999999999999999999"}, wantErr: "WORLD_SIZE="},
		{name: "local rank not below local size", vars: with(openmpi, "OMPI_COMM_WORLD_LOCAL_RANK", "2"), wantErr: "OMPI_COMM_WORLD_LOCAL_RANK=2 is not below"},
		{name: "local size above size", vars: with(openmpi, "OMPI_COMM_WORLD_LOCAL_SIZE", "3"), wantErr: "want 1 to OMPI_COMM_WORLD_SIZE=2"},
		{name: "spaces around values", vars: map[string]string{"RANK": " 1 ", "WORLD_SIZE": "2\n", "LOCAL_RANK": "0"}, want: Env{Launcher: Variables, Rank: 1, Size: 2}},
		{name: "bad MASTER_PORT", vars: with(torchrun, "MASTER_PORT", "70000"), wantErr: "MASTER_PORT=\"70000\" is not a TCP port"},
		{name: "bad MASTER_ADDR", vars: with(torchrun, "MASTER_ADDR", "a b"), wantErr: "MASTER_ADDR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnv(lookupOf(tc.vars))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrEnv), "wraps ErrEnv: %v", err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRendezvousAddr(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      Env
		override string
		want     string
		wantErr  string
	}{
		{name: "master port", env: Env{MasterAddr: "node0", MasterPort: 29500}, want: "node0:29500"},
		{name: "torchrun's agent holds the port: the next one", env: Env{MasterAddr: "node0", MasterPort: 29500, AgentStore: true}, want: "node0:29501"},
		{name: "override", env: Env{MasterAddr: "node0", MasterPort: 29500, AgentStore: true}, override: "4000", want: "node0:4000"},
		{name: "ipv6", env: Env{MasterAddr: "fe80::1", MasterPort: 29500}, want: "[fe80::1]:29500"},
		{name: "no address", env: Env{MasterPort: 1}, wantErr: "MASTER_ADDR is not set"},
		{name: "no port", env: Env{MasterAddr: "h"}, wantErr: "MASTER_PORT is not set"},
		{name: "bad override", env: Env{MasterAddr: "h", MasterPort: 1}, override: "x", wantErr: "AGENTRL_DIST_PORT"},
		{name: "agent store at the last port", env: Env{MasterAddr: "h", MasterPort: 65535, AgentStore: true}, wantErr: "65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.env.RendezvousAddr(tc.override)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, ErrEnv)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzParseEnv feeds ParseEnv environments of KEY=VALUE lines: it must
// never panic, and what it accepts must be a consistent position.
func FuzzParseEnv(f *testing.F) {
	f.Add("RANK=1\nWORLD_SIZE=2\nLOCAL_RANK=0")
	f.Add("TORCHELASTIC_RUN_ID=x\nRANK=0\nWORLD_SIZE=1\nLOCAL_RANK=0\nMASTER_PORT=1")
	f.Add("OMPI_COMM_WORLD_RANK=1\nOMPI_COMM_WORLD_SIZE=2\nRANK=1\nWORLD_SIZE=2")
	f.Add("SLURM_STEP_NUM_TASKS=3\nSLURM_PROCID=2\nSLURM_LOCALID=9")
	f.Add("PMI_RANK=0\nPMI_SIZE=1\nMPI_LOCALNRANKS=0")
	f.Fuzz(func(t *testing.T, text string) {
		vars := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
		e, err := ParseEnv(lookupOf(vars))
		if err != nil {
			if !errors.Is(err, ErrEnv) {
				t.Fatalf("error does not wrap ErrEnv: %v", err)
			}
			return
		}
		if e.Size < 1 || e.Rank < 0 || e.Rank >= e.Size || e.LocalRank < 0 || e.LocalSize < 0 || e.LocalSize > e.Size ||
			(e.LocalSize > 0 && e.LocalRank >= e.LocalSize) || e.MasterPort < 0 || e.MasterPort > 65535 {
			t.Fatalf("inconsistent %+v from %q", e, text)
		}
	})
}
