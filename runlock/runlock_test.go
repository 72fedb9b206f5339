package runlock_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/runlock"
)

// holderEnv makes the test binary a lock holder: it locks the folder the
// variable names, prints "locked <pid>" and waits for its stdin to close,
// then releases the lock and exits.
const holderEnv = "RUNLOCK_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holderEnv); dir != "" {
		os.Exit(hold(dir))
	}
	os.Exit(m.Run())
}

func hold(dir string) int {
	l, err := runlock.Acquire(dir)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Printf("locked %d\n", os.Getpid())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := l.Release(); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// holder starts another process holding dir's lock and waits until it
// holds it; closing the returned stdin makes it release the lock and
// exit.
func holder(t *testing.T, dir string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("locked %d\n", cmd.Process.Pid), line)
	return cmd, stdin
}

// TestSecondHolderInProcess: two locks on one folder through separate
// open files of one process exclude each other; the error names the
// holder (this process) and the folder; after Release the folder is
// free again.
func TestSecondHolderInProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	first, err := runlock.Acquire(dir)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), first.Owner().PID)
	assert.Equal(t, dir, first.Dir())

	_, err = runlock.Acquire(dir)
	require.ErrorIs(t, err, runlock.ErrLocked)
	var le *runlock.LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, first.Owner(), le.Owner, "the record the holder wrote")
	host, _ := os.Hostname()
	assert.Equal(t, fmt.Sprintf("runlock: run folder %s is in use by %s (pid %d on %s, since %s): wait for that run to end, stop it, or choose another folder",
		dir, filepath.Base(os.Args[0]), os.Getpid(), host, first.Owner().Started.Format("2006-01-02 15:04:05 UTC")), err.Error())

	require.NoError(t, first.Release())
	require.NoError(t, first.Release(), "twice does nothing")
	second, err := runlock.Acquire(dir)
	require.NoError(t, err)
	require.NoError(t, second.Release())
}

// TestSecondProcess: a folder another process holds is refused with an
// error naming that process; once it released the lock and ended, the
// folder is free.
func TestSecondProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cmd, stdin := holder(t, dir)
	_, err := runlock.Acquire(dir)
	require.ErrorIs(t, err, runlock.ErrLocked)
	var le *runlock.LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, cmd.Process.Pid, le.Owner.PID)
	assert.Equal(t, filepath.Base(os.Args[0]), le.Owner.Command)
	assert.WithinDuration(t, time.Now(), le.Owner.Started, time.Minute)
	assert.Contains(t, err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid))

	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	l, err := runlock.Acquire(dir)
	require.NoError(t, err)
	require.NoError(t, l.Release())
}

// TestCrashedHolder: a holder killed without releasing leaves its record
// in the lock file, but not its lock: the kernel dropped it, so the next
// Acquire takes the folder and writes its own record.
func TestCrashedHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cmd, _ := holder(t, dir)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	b, err := os.ReadFile(filepath.Join(dir, runlock.FileName))
	require.NoError(t, err)
	dead, err := runlock.ParseOwner(b)
	require.NoError(t, err)
	assert.Equal(t, cmd.Process.Pid, dead.PID, "the dead run's record is still there")

	l, err := runlock.Acquire(dir)
	require.NoError(t, err)
	b, err = os.ReadFile(filepath.Join(dir, runlock.FileName))
	require.NoError(t, err)
	now, err := runlock.ParseOwner(b)
	require.NoError(t, err)
	assert.Equal(t, l.Owner(), now)
	require.NoError(t, l.Release())
	assert.NoFileExists(t, filepath.Join(dir, runlock.FileName))
}

// TestReleaseTidies: Release removes the lock file, and the folder when
// Acquire made it and nothing else went in; a folder that existed, or
// that holds the run's files, stays.
func TestReleaseTidies(t *testing.T) {
	base := t.TempDir()
	made := filepath.Join(base, "a", "run")
	l, err := runlock.Acquire(made)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(made, runlock.FileName))
	require.NoError(t, l.Release())
	assert.NoDirExists(t, made)

	written := filepath.Join(base, "written")
	l, err = runlock.Acquire(written)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(written, "metrics.jsonl"), nil, 0o644))
	require.NoError(t, l.Release())
	assert.FileExists(t, filepath.Join(written, "metrics.jsonl"))
	assert.NoFileExists(t, filepath.Join(written, runlock.FileName))

	existing := filepath.Join(base, "existing")
	require.NoError(t, os.Mkdir(existing, 0o755))
	l, err = runlock.Acquire(existing)
	require.NoError(t, err)
	require.NoError(t, l.Release())
	assert.DirExists(t, existing)
}

// TestAcquireErrors: an empty name and a folder that is a file are
// errors, not locks.
func TestAcquireErrors(t *testing.T) {
	_, err := runlock.Acquire("")
	assert.ErrorContains(t, err, "empty folder name")
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = runlock.Acquire(file)
	require.Error(t, err)
	assert.False(t, errors.Is(err, runlock.ErrLocked))
}

// TestManyAcquirers: processes' worth of Acquire and Release on one
// folder from goroutines never hold it at once.
func TestManyAcquirers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	held := make(chan int, 64)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for range 50 {
				l, err := runlock.Acquire(dir)
				if errors.Is(err, runlock.ErrLocked) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				held <- g
				if n := len(held); n != 1 {
					errs <- fmt.Errorf("%d holders at once", n)
					return
				}
				<-held
				if err := l.Release(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}

func TestOwnerString(t *testing.T) {
	started := time.Date(2025, 6, 1, 10, 2, 3, 0, time.UTC)
	for _, c := range []struct {
		o    runlock.Owner
		want string
	}{
		{runlock.Owner{PID: 4242, Host: "gpu0", Command: "grpotcr", Started: started}, "grpotcr (pid 4242 on gpu0, since 2025-06-01 10:02:03 UTC)"},
		{runlock.Owner{PID: 7}, "a process (pid 7)"},
		{runlock.Owner{}, "another process (which has not written its name yet)"},
	} {
		assert.Equal(t, c.want, c.o.String())
	}
}

func TestParseOwner(t *testing.T) {
	o, err := runlock.ParseOwner([]byte(`{"pid":12,"host":"h","command":"arith","started":"2025-06-01T10:02:03Z"}` + "\n"))
	require.NoError(t, err)
	assert.Equal(t, runlock.Owner{PID: 12, Host: "h", Command: "arith", Started: time.Date(2025, 6, 1, 10, 2, 3, 0, time.UTC)}, o)
	o, err = runlock.ParseOwner(nil)
	require.NoError(t, err)
	assert.Zero(t, o)
	for _, bad := range []string{`{"pid":-1}`, `{"pid":"x"}`, `not json`, `{"started":"yesterday"}`} {
		_, err := runlock.ParseOwner([]byte(bad))
		assert.ErrorContains(t, err, "runlock: lock record", bad)
	}
}

func FuzzParseOwner(f *testing.F) {
	f.Add([]byte(`{"pid":12,"host":"h","command":"arith","started":"2025-06-01T10:02:03Z"}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"pid":1e99}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := runlock.ParseOwner(b)
		if err != nil && o != (runlock.Owner{}) {
			t.Fatalf("owner %+v with error %v", o, err)
		}
		if err == nil && o.PID < 0 {
			t.Fatalf("negative pid %d", o.PID)
		}
		_ = strings.TrimSpace(o.String())
	})
}
