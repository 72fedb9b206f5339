//go:build agentrl_mpi && cgo

package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of the MPI engine run in two ways. Under an MPI launcher
// (mpirun -np 2 dist.test, as .ci/run does) TestMain opens one MPI
// communicator — MPI is initialised once per process — for the tests
// that use it (TestMPI…), and closes it after them. Without a launcher,
// the scenario tests (TestMPIScenario…) start mpirun themselves on this
// test binary with ScenarioVar set, and TestMain plays the scenario's
// part on each rank instead of running tests.

// scenarioVar names the scenario a rank plays under mpirun.
const scenarioVar = "AGENTRL_DIST_TEST_SCENARIO"

// mpiComm is the process's MPI communicator under a launcher; nil
// otherwise.
var mpiComm Comm

func TestMain(m *testing.M) {
	env, err := FromEnviron()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if s := os.Getenv(scenarioVar); s != "" && env.Size > 1 {
		os.Exit(playScenario(s, env))
	}
	if env.Size > 1 {
		if mpiComm, err = Open(context.Background(), Options{Env: &env, Timeout: time.Minute}); err != nil {
			fmt.Fprintln(os.Stderr, "dist.test: opening MPI:", err)
			os.Exit(2)
		}
	}
	code := m.Run()
	if mpiComm != nil {
		if err := mpiComm.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "dist.test: closing MPI:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// playScenario is one rank's part in a failure scenario: rank 1 hangs
// or dies, rank 0 reports what its all-reduce (its reduce-scatter, in
// "die-rs") says. It returns the exit status.
func playScenario(s string, env Env) int {
	ctx := context.Background()
	timeout := 2 * time.Second
	if s == "die" || s == "die-rs" {
		timeout = time.Minute // the failure must come at once, not at the timeout
	}
	c, err := Open(ctx, Options{Env: &env, Timeout: timeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	if env.Rank == 1 {
		switch s {
		case "hang":
			time.Sleep(time.Minute)
		case "die", "die-rs":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return 0
	}
	start := time.Now()
	if s == "die-rs" {
		err = c.ReduceScatter(ctx, Float32s{1, 2, 3, 4}, make(Float32s, 2), Sum)
	} else {
		err = c.AllReduce(ctx, Float32s{1, 2, 3}, Sum)
	}
	fmt.Fprintf(os.Stderr, "rank %d after %.1fs: %v\n", env.Rank, time.Since(start).Seconds(), err)
	if err == nil {
		_ = c.Close()
		return 0
	}
	_ = c.Close() // not finalised: the collective was abandoned
	return 3
}

// needMPI skips a test that uses the MPI communicator when the binary
// was not started by an MPI launcher.
func needMPI(t *testing.T) Comm {
	t.Helper()
	if mpiComm == nil {
		t.Skip("not under an MPI launcher: run mpirun -np 2 on this test binary")
	}
	return mpiComm
}

func TestMPICollectives(t *testing.T) {
	c := needMPI(t)
	require.NoError(t, checkCollectives(context.Background(), t, c))
}

// A reduce-scatter of a sharded optimizer's size (a 25 MiB unit of
// float32s), with terms exact in float32: send[i] = i mod 1000 + rank on
// every rank, so block r of the sum is n·(i mod 1000) + n(n−1)/2 at
// element i = r·m + j.
func TestMPIReduceScatterLarge(t *testing.T) {
	c := needMPI(t)
	n := c.Size()
	m := 25 << 20 / 4 / n
	send := make(Float32s, m*n)
	for i := range send {
		send[i] = float32(i%1000) + float32(c.Rank())
	}
	recv := make(Float32s, m)
	require.NoError(t, c.ReduceScatter(context.Background(), send, recv, Sum))
	for j := 0; j < m; j += 7919 {
		i := c.Rank()*m + j
		require.Equal(t, float32(n*(i%1000)+n*(n-1)/2), recv[j], "element %d of rank %d's block", j, c.Rank())
	}
}

// A collective larger than one MPI message, with a sum whose terms are
// exact in float32: every rank gets the same, exact values.
func TestMPIAllReduceLarge(t *testing.T) {
	c := needMPI(t)
	n := 3<<20 + 5
	buf := make(Float32s, n)
	for i := range buf {
		buf[i] = float32(i%1000) + float32(c.Rank())
	}
	require.NoError(t, c.AllReduce(context.Background(), buf, Sum))
	size := c.Size()
	for i := 0; i < n; i += 9973 {
		want := float32(size*(i%1000) + size*(size-1)/2)
		require.Equal(t, want, buf[i], "element %d", i)
	}
}

// mpirunCommand returns mpirun over this test binary with scenario s,
// or skips when there is no mpirun or this is already a rank.
func mpirunCommand(ctx context.Context, t *testing.T, s string) *exec.Cmd {
	t.Helper()
	if mpiComm != nil {
		t.Skip("already a rank: the scenario tests start mpirun themselves")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("no mpirun on PATH")
	}
	cmd := exec.CommandContext(ctx, mpirun, "--oversubscribe", "-np", "2", os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), scenarioVar+"="+s, "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	return cmd
}

// Rank 1 hangs (sleeps a minute) before a collective: rank 0 fails after
// the 2 s timeout naming it, exits, and mpirun ends the job.
func TestMPIScenarioHang(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	start := time.Now()
	out, err := mpirunCommand(ctx, t, "hang").CombinedOutput()
	elapsed := time.Since(start)
	t.Logf("mpirun after %.1fs: %v\n%s", elapsed.Seconds(), err, out)
	require.Error(t, err, "the job fails")
	require.NoError(t, ctx.Err(), "and does not hang")
	assert.Contains(t, string(out), "dist: all-reduce #1 on rank 0: rank 1 did not arrive within 2s")
	assert.Less(t, elapsed, 30*time.Second)
}

// Rank 1 dies (SIGKILL) before a collective: the job ends well before
// the one-minute timeout, naming rank 1 — in rank 0's error (its
// connection to the watchdog closed) or in mpirun's report, whichever
// comes first.
func TestMPIScenarioDie(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	start := time.Now()
	out, err := mpirunCommand(ctx, t, "die").CombinedOutput()
	elapsed := time.Since(start)
	t.Logf("mpirun after %.1fs: %v\n%s", elapsed.Seconds(), err, out)
	require.Error(t, err, "the job fails")
	require.NoError(t, ctx.Err(), "and does not hang")
	o := string(out)
	assert.True(t, strings.Contains(o, "rank 1 is gone") || strings.Contains(o, "process rank 1"), "names rank 1")
	assert.Less(t, elapsed, 30*time.Second)
}

// Rank 1 dies (SIGKILL) before a reduce-scatter that rank 0 waits in:
// rank 0's reduce-scatter fails at once naming it (or mpirun's report
// does, whichever comes first), as an all-reduce's does.
func TestMPIScenarioDieReduceScatter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	start := time.Now()
	out, err := mpirunCommand(ctx, t, "die-rs").CombinedOutput()
	elapsed := time.Since(start)
	t.Logf("mpirun after %.1fs: %v\n%s", elapsed.Seconds(), err, out)
	require.Error(t, err, "the job fails")
	require.NoError(t, ctx.Err(), "and does not hang")
	o := string(out)
	assert.True(t, strings.Contains(o, "dist: reduce-scatter #1 on rank 0: rank 1 is gone") || strings.Contains(o, "process rank 1"), "names rank 1")
	assert.Less(t, elapsed, 30*time.Second)
}
