package dist

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrEnv is wrapped by every error of ParseEnv: launcher variables that
// are malformed, incomplete, out of range or in disagreement.
var ErrEnv = errors.New("dist: launcher environment")

// Launcher names what started the process, as ParseEnv recognised it.
type Launcher string

// Launchers ParseEnv recognises.
const (
	// Alone: no launcher variables; one process, rank 0 of 1.
	Alone Launcher = "none"
	// Torchrun: torchrun (torch.distributed.run), recognised by
	// TORCHELASTIC_RUN_ID; RANK, WORLD_SIZE, LOCAL_RANK,
	// LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
	Torchrun Launcher = "torchrun"
	// OpenMPI: Open MPI's mpirun (and srun launching Open MPI
	// programs that sets them): OMPI_COMM_WORLD_RANK, _SIZE,
	// _LOCAL_RANK, _LOCAL_SIZE.
	OpenMPI Launcher = "openmpi"
	// PMI: MPICH's and Intel MPI's Hydra mpiexec: PMI_RANK, PMI_SIZE,
	// MPI_LOCALRANKID, MPI_LOCALNRANKS.
	PMI Launcher = "pmi"
	// Slurm: a job step started by srun, recognised by
	// SLURM_STEP_NUM_TASKS: SLURM_PROCID, SLURM_STEP_NUM_TASKS,
	// SLURM_LOCALID. (The batch script itself, where srun has not run,
	// also carries SLURM_PROCID but no step: it is one process.)
	Slurm Launcher = "slurm"
	// Variables: RANK and WORLD_SIZE (with LOCAL_RANK) set by another
	// launcher or by hand, without torchrun.
	Variables Launcher = "env"
)

// Env is where this process stands in its job, as its launcher told it
// through the environment.
type Env struct {
	// Launcher is what set the variables (Alone without any).
	Launcher Launcher
	// Rank is this process's number in [0, Size); Size the number of
	// processes of the job (the world size).
	Rank, Size int
	// LocalRank is the number of this process among those of its
	// machine (the GPU it takes); LocalSize their count, 0 when the
	// launcher does not say.
	LocalRank, LocalSize int
	// MasterAddr and MasterPort are MASTER_ADDR and MASTER_PORT when set
	// ("" and 0 otherwise): where rank 0 can be reached.
	MasterAddr string
	MasterPort int
	// AgentStore is torchrun's TORCHELASTIC_USE_AGENT_STORE=True: its
	// agent already listens on MasterPort (PyTorch's TCPStore), so the
	// rendezvous of this package takes MasterPort+1 (RendezvousAddr).
	AgentStore bool
}

// Distributed reports whether the job has more than one process.
func (e Env) Distributed() bool { return e.Size > 1 }

// Leader reports whether this is rank 0, the rank that writes a job's
// files.
func (e Env) Leader() bool { return e.Rank == 0 }

// String is a one-line description: "rank 1 of 2 (local 1), openmpi".
func (e Env) String() string {
	if e.Launcher == Alone || e.Launcher == "" {
		return "one process (no launcher)"
	}
	return fmt.Sprintf("rank %d of %d (local %d), %s", e.Rank, e.Size, e.LocalRank, e.Launcher)
}

// RendezvousPortVar names the variable that overrides the port of the
// TCP rendezvous (RendezvousAddr); RendezvousHostVar the one that sets
// the host rank 0 advertises when MPI carries its address (Open).
const (
	RendezvousPortVar = "AGENTRL_DIST_PORT"
	RendezvousHostVar = "AGENTRL_DIST_HOST"
)

// RendezvousAddr is the host:port where rank 0 listens and the other
// ranks connect for the TCP rendezvous (the NCCL id exchange and the
// watchdog's arrivals, see the package doc): MASTER_ADDR, and
// MASTER_PORT — plus one under torchrun's agent store, whose TCPStore
// holds MASTER_PORT itself — unless port overrides it (the value of
// AGENTRL_DIST_PORT, "" when unset).
func (e Env) RendezvousAddr(port string) (string, error) {
	if e.MasterAddr == "" {
		return "", fmt.Errorf("%w: MASTER_ADDR is not set: the ranks meet at MASTER_ADDR:MASTER_PORT (set both to a host of rank 0 and a free port)", ErrEnv)
	}
	p := e.MasterPort
	if port != "" {
		v, err := parsePort(RendezvousPortVar, port)
		if err != nil {
			return "", err
		}
		p = v
	} else {
		if p == 0 {
			return "", fmt.Errorf("%w: MASTER_PORT is not set: the ranks meet at MASTER_ADDR:MASTER_PORT", ErrEnv)
		}
		if e.AgentStore {
			if p == 65535 {
				return "", fmt.Errorf("%w: MASTER_PORT is 65535 and torchrun's agent holds it: set %s", ErrEnv, RendezvousPortVar)
			}
			p++
		}
	}
	return fmt.Sprintf("%s:%d", bracketHost(e.MasterAddr), p), nil
}

// bracketHost puts an IPv6 literal in brackets for host:port.
func bracketHost(h string) string {
	if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
		return "[" + h + "]"
	}
	return h
}

// FromEnviron is ParseEnv over this process's environment.
func FromEnviron() (Env, error) { return ParseEnv(os.LookupEnv) }

// maxSize bounds the world sizes ParseEnv accepts.
const maxSize = 1 << 20

// source is one launcher's reading of rank and size.
type source struct {
	launcher             Launcher
	rank, size           int
	localRank, localSize int // −1: not given
	vars                 string
}

// ParseEnv reads the launcher variables through lookup (os.LookupEnv in
// FromEnviron). It recognises torchrun, Open MPI's mpirun, Hydra's
// mpiexec (PMI), srun job steps and plain RANK/WORLD_SIZE; without any it
// returns one process (Alone, rank 0 of 1).
//
// Launchers nest: torchrun run by srun or mpirun sees its agents' outer
// variables too, and an mpirun inside a Slurm allocation starts its
// daemons through srun. The innermost launcher counts: torchrun before
// the MPI launchers, those before Slurm; the outer variables are then
// ignored. Plain RANK/WORLD_SIZE (without torchrun) and the MPI
// launchers' own variables, and Open MPI's and PMI's when both are set,
// are read at the same level and must agree. Errors, which wrap ErrEnv
// and name the variables: a value that is not a decimal integer, a rank
// outside [0, size), an incomplete set (RANK without WORLD_SIZE, torchrun
// without LOCAL_RANK …), variables that disagree, and a MASTER_PORT that
// is not a port.
func ParseEnv(lookup func(string) (string, bool)) (Env, error) {
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		return strings.TrimSpace(v), ok
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := lookup(n); ok {
				return true
			}
		}
		return false
	}
	var e Env
	if v, ok := get("MASTER_ADDR"); ok && v != "" {
		if strings.ContainsAny(v, " \t\r\n/") {
			return Env{}, fmt.Errorf("%w: MASTER_ADDR=%q is not a host name or address", ErrEnv, v)
		}
		e.MasterAddr = v
	}
	if v, ok := get("MASTER_PORT"); ok && v != "" {
		p, err := parsePort("MASTER_PORT", v)
		if err != nil {
			return Env{}, err
		}
		e.MasterPort = p
	}
	if v, ok := get("TORCHELASTIC_USE_AGENT_STORE"); ok {
		e.AgentStore = v == "True"
	}

	if has("TORCHELASTIC_RUN_ID") {
		s, err := readSource(get, Torchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", true)
		if err != nil {
			return Env{}, err
		}
		return e.with(s), nil
	}
	var mpis []source
	if has("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE") {
		s, err := readSource(get, OpenMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", false)
		if err != nil {
			return Env{}, err
		}
		mpis = append(mpis, s)
	}
	if has("PMI_RANK", "PMI_SIZE") {
		s, err := readSource(get, PMI, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", false)
		if err != nil {
			return Env{}, err
		}
		mpis = append(mpis, s)
	}
	var plain *source
	if has("RANK", "WORLD_SIZE") {
		s, err := readSource(get, Variables, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", false)
		if err != nil {
			return Env{}, err
		}
		plain = &s
	}
	var chosen *source
	switch {
	case len(mpis) > 0:
		chosen = &mpis[0]
		for _, s := range mpis[1:] {
			if err := agree(*chosen, s); err != nil {
				return Env{}, err
			}
		}
	case has("SLURM_STEP_NUM_TASKS"):
		s, err := readSource(get, Slurm, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "", false)
		if err != nil {
			return Env{}, err
		}
		chosen = &s
	case plain != nil:
		chosen = plain
		if chosen.size > 1 && chosen.localRank < 0 {
			return Env{}, fmt.Errorf("%w: RANK=%d and WORLD_SIZE=%d are set but LOCAL_RANK is not: each process needs its number on its machine (its GPU)", ErrEnv, chosen.rank, chosen.size)
		}
	default:
		e.Launcher, e.Size = Alone, 1
		return e, nil
	}
	if plain != nil && chosen != plain {
		if err := agree(*chosen, *plain); err != nil {
			return Env{}, err
		}
		if chosen.localRank < 0 {
			chosen.localRank, chosen.localSize = plain.localRank, plain.localSize
		}
	}
	return e.with(*chosen), nil
}

// with fills e's rank fields from s.
func (e Env) with(s source) Env {
	e.Launcher, e.Rank, e.Size = s.launcher, s.rank, s.size
	e.LocalRank, e.LocalSize = max(s.localRank, 0), max(s.localSize, 0)
	if s.localRank < 0 && s.size == 1 {
		e.LocalSize = 1
	}
	return e
}

// agree checks that two sources at the same level give the same rank,
// size and (when both give it) local rank.
func agree(a, b source) error {
	if a.rank != b.rank || a.size != b.size || a.localRank >= 0 && b.localRank >= 0 && a.localRank != b.localRank {
		return fmt.Errorf("%w: the launcher variables disagree: %s say rank %d of %d (local %d) but %s say rank %d of %d (local %d); unset the stale ones",
			ErrEnv, a.vars, a.rank, a.size, a.localRank, b.vars, b.rank, b.size, b.localRank)
	}
	return nil
}

// readSource reads one launcher's variables: rank and size required
// (and the local rank when needLocal), the local ones optional (an
// empty name: not offered).
func readSource(get func(string) (string, bool), l Launcher, rankVar, sizeVar, localVar, localSizeVar string, needLocal bool) (source, error) {
	s := source{launcher: l, localRank: -1, localSize: -1, vars: rankVar + "/" + sizeVar}
	read := func(name string, required bool, dst *int) error {
		v, ok := get(name)
		if !ok || v == "" {
			if required {
				return fmt.Errorf("%w: %s is set by %s but %s is missing", ErrEnv, s.vars, l, name)
			}
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxSize || strings.HasPrefix(v, "+") {
			return fmt.Errorf("%w: %s=%q is not a number in [0, %d]", ErrEnv, name, v, maxSize)
		}
		*dst = n
		return nil
	}
	if err := read(rankVar, true, &s.rank); err != nil {
		return s, err
	}
	if err := read(sizeVar, true, &s.size); err != nil {
		return s, err
	}
	if localVar != "" {
		if err := read(localVar, needLocal, &s.localRank); err != nil {
			return s, err
		}
	}
	if localSizeVar != "" {
		if err := read(localSizeVar, false, &s.localSize); err != nil {
			return s, err
		}
	}
	switch {
	case s.size < 1:
		return s, fmt.Errorf("%w: %s=%d: the world has at least one process", ErrEnv, sizeVar, s.size)
	case s.rank >= s.size:
		return s, fmt.Errorf("%w: %s=%d is not below %s=%d", ErrEnv, rankVar, s.rank, sizeVar, s.size)
	case s.localSize == 0 || s.localSize > s.size:
		return s, fmt.Errorf("%w: %s=%d: want 1 to %s=%d", ErrEnv, localSizeVar, s.localSize, sizeVar, s.size)
	case s.localSize > 0 && s.localRank >= s.localSize:
		return s, fmt.Errorf("%w: %s=%d is not below %s=%d", ErrEnv, localVar, s.localRank, localSizeVar, s.localSize)
	}
	return s, nil
}

// parsePort reads a TCP port (1–65535) of variable name.
func parsePort(name, v string) (int, error) {
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 || strings.HasPrefix(v, "+") {
		return 0, fmt.Errorf("%w: %s=%q is not a TCP port (1–65535)", ErrEnv, name, v)
	}
	return p, nil
}
