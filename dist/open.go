package dist

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// Engines Options.Engine names.
const (
	// EngineAuto chooses by the backend: NCCL for a CUDA backend, MPI
	// otherwise.
	EngineAuto = ""
	// EngineMPI runs collectives on host memory through MPI (build tag
	// agentrl_mpi).
	EngineMPI = "mpi"
	// EngineNCCL runs collectives on a CUDA backend's memory through
	// NCCL (build tag agentrl_cuda; libnccl.so.2 at run time).
	EngineNCCL = "nccl"
)

// TimeoutVar names the variable that sets Options.Timeout when it is 0,
// as a Go duration ("90s", "30m").
const TimeoutVar = "AGENTRL_DIST_TIMEOUT"

// DefaultTimeout is how long a collective waits for the slowest rank
// when neither Options.Timeout nor TimeoutVar says: as long as
// PyTorch's default for NCCL process groups.
const DefaultTimeout = 10 * time.Minute

// Options configure Open.
type Options struct {
	// Env is where this process stands in its job; nil reads the
	// environment (FromEnviron).
	Env *Env
	// Backend is the backend the model computes on. A CUDA backend
	// (*gpu.Backend) gets NCCL on its memory; any other, or nil, MPI on
	// host memory.
	Backend backend.Backend
	// Engine is EngineAuto, EngineMPI or EngineNCCL.
	Engine string
	// Timeout bounds each collective's wait for the slowest rank, and
	// the rendezvous's for the ranks to join; 0 takes TimeoutVar, or
	// DefaultTimeout. A rank that waits longer fails naming the ranks
	// that did not arrive. It must exceed the longest imbalance between
	// ranks: a rank whose rollouts end first waits in the next
	// collective for the others'.
	Timeout time.Duration
}

// Open joins the job this process belongs to. Alone (no launcher
// variables, or a world of one) it returns Local(o.Backend), unless
// o.Engine names an engine, which then runs with one rank. Otherwise
// it opens the engine — NCCL for a CUDA backend, MPI for a CPU one — and
// the watchdog's connection to rank 0, and checks that the engine sees
// the same rank and size as the launcher. Every rank of the job must
// call Open with the same engine; it returns when all of them have
// joined, or fails after the timeout naming those that did not.
//
// MPI needs the build tag agentrl_mpi and a launcher that starts MPI
// processes (mpirun, mpiexec, srun --mpi=pmix). NCCL needs the build tag
// agentrl_cuda and libnccl.so.2 on the loader's path; its unique id goes
// from rank 0 to the others through MPI under an MPI launcher in a
// binary that has MPI, and otherwise through a TCP exchange at
// MASTER_ADDR:MASTER_PORT (Env.RendezvousAddr), where rank 0 listens.
func Open(ctx context.Context, o Options) (Comm, error) {
	env := o.Env
	if env == nil {
		e, err := FromEnviron()
		if err != nil {
			return nil, err
		}
		env = &e
	}
	if env.Size <= 1 && o.Engine == EngineAuto {
		return Local(o.Backend), nil
	}
	timeout, err := o.timeout()
	if err != nil {
		return nil, err
	}
	g, isGPU := o.Backend.(*gpu.Backend)
	engine := o.Engine
	if engine == EngineAuto {
		engine = EngineMPI
		if isGPU {
			engine = EngineNCCL
		}
	}
	switch engine {
	case EngineMPI:
		return openMPIComm(ctx, *env, timeout)
	case EngineNCCL:
		if !isGPU {
			return nil, fmt.Errorf("%w: NCCL runs on a CUDA backend's memory; the backend is %T", ErrArg, o.Backend)
		}
		return openNCCLComm(ctx, *env, g, timeout)
	}
	return nil, fmt.Errorf("%w: engine %q, want %q or %q", ErrArg, o.Engine, EngineMPI, EngineNCCL)
}

// timeout resolves Options.Timeout.
func (o Options) timeout() (time.Duration, error) {
	if o.Timeout < 0 {
		return 0, fmt.Errorf("%w: Options.Timeout %v, want ≥ 0", ErrArg, o.Timeout)
	}
	if o.Timeout > 0 {
		return o.Timeout, nil
	}
	if v, ok := os.LookupEnv(TimeoutVar); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%w: %s=%q is not a positive Go duration (such as 90s or 30m)", ErrEnv, TimeoutVar, v)
		}
		return d, nil
	}
	return DefaultTimeout, nil
}

// openMPIComm opens MPI, checks it against env and opens the watchdog,
// whose address rank 0 broadcasts through MPI.
func openMPIComm(ctx context.Context, env Env, timeout time.Duration) (Comm, error) {
	eng, err := openMPI(ctx)
	if err != nil {
		return nil, err
	}
	if eng.rank() != env.Rank || eng.size() != env.Size {
		_ = eng.close(false)
		return nil, fmt.Errorf("%w: the launcher says rank %d of %d but MPI says rank %d of %d: start the processes with an MPI launcher (mpirun, or srun --mpi=pmix)",
			ErrEnv, env.Rank, env.Size, eng.rank(), eng.size())
	}
	mon, _, err := mpiWatchdog(ctx, eng, env, nil, timeout)
	if err != nil {
		_ = eng.close(false)
		return nil, err
	}
	return newComm(eng, mon, timeout), nil
}

// mpiWatchdog starts the watchdog through an MPI engine: rank 0 listens
// on an ephemeral port and broadcasts its address, a random token and
// blob (the NCCL id, or nothing); the others join and return the blob.
func mpiWatchdog(ctx context.Context, eng engine, env Env, blob []byte, timeout time.Duration) (*monitor, []byte, error) {
	const addrLen, blobLen = 256, 1024
	msg := make(Bytes, 8+addrLen+2+blobLen)
	var ln net.Listener
	if eng.rank() == 0 {
		port := "0"
		if v := os.Getenv(RendezvousPortVar); v != "" {
			if _, err := parsePort(RendezvousPortVar, v); err != nil {
				return nil, nil, err
			}
			port = v
		}
		var err error
		if ln, err = net.Listen("tcp", ":"+port); err != nil {
			return nil, nil, fmt.Errorf("dist: watchdog: %w", err)
		}
		host, err := advertisedHost(env)
		if err != nil {
			_ = ln.Close()
			return nil, nil, err
		}
		addr := net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		if len(addr) > addrLen || len(blob) > blobLen {
			_ = ln.Close()
			return nil, nil, fmt.Errorf("%w: watchdog address %q or id of %d bytes too long", ErrArg, addr, len(blob))
		}
		if _, err := rand.Read(msg[:8]); err != nil {
			_ = ln.Close()
			return nil, nil, err
		}
		copy(msg[8:], addr)
		binary.BigEndian.PutUint16(msg[8+addrLen:], uint16(len(blob)))
		copy(msg[8+addrLen+2:], blob)
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := eng.run(bctx, coll{kind: kBroadcast, recv: msg, root: 0}); err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil, nil, fmt.Errorf("dist: broadcasting the watchdog's address: %w", err)
	}
	token := binary.BigEndian.Uint64(msg)
	if eng.rank() == 0 {
		mon, err := serveMonitor(ctx, ln, env.Size, token, nil, timeout)
		return mon, blob, err
	}
	addr := string(bytes.TrimRight(msg[8:8+addrLen], "\x00"))
	n := int(binary.BigEndian.Uint16(msg[8+addrLen:]))
	got := bytes.Clone(msg[8+addrLen+2 : 8+addrLen+2+min(n, blobLen)])
	mon, _, err := joinMonitor(ctx, addr, env.Rank, env.Size, token, timeout)
	return mon, got, err
}

// advertisedHost is the host the other ranks reach rank 0 at:
// AGENTRL_DIST_HOST, else MASTER_ADDR, else the loopback address when
// every rank is on this machine, else the host name.
func advertisedHost(env Env) (string, error) {
	if h := os.Getenv(RendezvousHostVar); h != "" {
		return h, nil
	}
	if env.MasterAddr != "" {
		return env.MasterAddr, nil
	}
	if env.LocalSize == env.Size {
		return "127.0.0.1", nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("dist: watchdog: the host name (set %s to rank 0's address): %w", RendezvousHostVar, err)
	}
	return h, nil
}

// openNCCLComm opens NCCL on g: rank 0 makes the unique id, which
// reaches the others through MPI (under an MPI launcher, in a binary
// with MPI) or the TCP rendezvous at env.RendezvousAddr.
func openNCCLComm(ctx context.Context, env Env, g *gpu.Backend, timeout time.Duration) (Comm, error) {
	var id gpu.NCCLID
	if env.Rank == 0 {
		var err error
		if id, err = gpu.NewNCCLID(); err != nil {
			return nil, err
		}
	}
	var (
		mon  *monitor
		blob = id[:] // one rank: its own id
		boot engine  // MPI, when it carried the id; closed with the comm
	)
	switch {
	case env.Size <= 1: // nothing to exchange
	case (env.Launcher == OpenMPI || env.Launcher == PMI) && mpiCompiled:
		eng, err := openMPI(ctx)
		if err != nil {
			return nil, err
		}
		if mon, blob, err = mpiWatchdog(ctx, eng, env, id[:], timeout); err != nil {
			_ = eng.close(false)
			return nil, err
		}
		boot = eng
	default:
		addr, err := env.RendezvousAddr(os.Getenv(RendezvousPortVar))
		if err != nil {
			if env.Launcher == OpenMPI || env.Launcher == PMI {
				err = fmt.Errorf("%w (or build with -tags agentrl_mpi, which carries the id through MPI)", err)
			}
			return nil, err
		}
		if env.Rank == 0 {
			_, port, _ := net.SplitHostPort(addr)
			ln, err := net.Listen("tcp", ":"+port)
			if err != nil {
				return nil, fmt.Errorf("dist: rendezvous at %s: %w", addr, err)
			}
			if mon, err = serveMonitor(ctx, ln, env.Size, 0, id[:], timeout); err != nil {
				return nil, err
			}
		} else if mon, blob, err = joinMonitor(ctx, addr, env.Rank, env.Size, 0, timeout); err != nil {
			return nil, err
		}
	}
	if len(blob) != len(id) {
		if mon != nil {
			_ = mon.close(false)
		}
		return nil, fmt.Errorf("dist: the NCCL id from rank 0 has %d bytes, want %d", len(blob), len(id))
	}
	copy(id[:], blob)
	nc, err := g.NewNCCL(ctx, id, env.Rank, env.Size)
	if err != nil {
		if mon != nil {
			_ = mon.close(false)
		}
		if boot != nil {
			_ = boot.close(false)
		}
		return nil, err
	}
	return newComm(&ncclEngine{nc: nc, be: g, boot: boot}, mon, timeout), nil
}
