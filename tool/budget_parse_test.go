package tool

import (
	"os"
	"path"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProcStat(t *testing.T) {
	// Fields from 3 on: state S, ppid 1, pgrp, session, tty, tpgid, flags,
	// minflt, cminflt, majflt, cmajflt, utime 7, stime 3, cutime 2,
	// cstime 1, priority, nice, num_threads 4, itrealvalue, starttime 555.
	rest := " S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 4 0 555 1000 200"
	want := procStat{State: 'S', PPID: 1, CPU: 7 + 3, ChildCPU: 2 + 1, Threads: 4, Start: 555}
	for _, comm := range []string{"(python3)", "(py thon)", "(a) S 9 9 (b)", "()", "(x)))"} {
		got, err := parseProcStat([]byte("1234 " + comm + rest + "\n"))
		require.NoError(t, err, comm)
		assert.Equal(t, want, got, comm)
	}
	for _, bad := range []string{"", "1234 python3 S 1", "1 (x) S 1 2 3", "1 (x) SS" + rest[2:], "1 (x) S x" + rest[3:]} {
		_, err := parseProcStat([]byte(bad))
		assert.ErrorIs(t, err, errProcFormat, "%q", bad)
	}
	// This thread, read independently: it is running (it is reading),
	// its process's parent is os.Getppid(), and it has threads.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Skip("no /proc here")
	}
	self, err := parseProcStat(b)
	require.NoError(t, err)
	assert.Equal(t, os.Getppid(), self.PPID)
	assert.Equal(t, byte('R'), self.State)
	assert.GreaterOrEqual(t, self.Threads, 1)
}

func TestParseProcStatusMemory(t *testing.T) {
	status := "Name:\tpython3\nVmRSS:\t  2048 kB\nRssAnon:\t    1024 kB\nRssFile:\t     999 kB\nRssShmem:\t       8 kB\nVmSwap:\t       4 kB\nThreads:\t1\n"
	got, err := parseProcStatusMemory([]byte(status))
	require.NoError(t, err)
	assert.Equal(t, int64(1024+8+4)<<10, got, "RssAnon + RssShmem + VmSwap, not RssFile")
	got, err = parseProcStatusMemory([]byte("Name:\tkthreadd\n"))
	require.NoError(t, err)
	assert.Zero(t, got, "a kernel thread shows no Rss lines")
	_, err = parseProcStatusMemory([]byte("RssAnon:\t12 MB\n"))
	assert.ErrorIs(t, err, errProcFormat)
}

func TestParseSmapsRollupMemory(t *testing.T) {
	rollup := "55c5f4144000-7fffd5025000 ---p 00000000 00:00 0 [rollup]\nRss:  320732 kB\nPss:  319389 kB\n" +
		"Pss_Dirty: 314096 kB\nPss_Anon: 314096 kB\nPss_File: 5293 kB\nPss_Shmem: 12 kB\nSwap: 0 kB\nSwapPss: 4 kB\n"
	got, err := parseSmapsRollupMemory([]byte(rollup))
	require.NoError(t, err)
	assert.Equal(t, int64(314096+12+4)<<10, got, "Pss_Anon + Pss_Shmem + SwapPss")
	// An older kernel: no Pss_Anon, so Pss + SwapPss.
	got, err = parseSmapsRollupMemory([]byte("Rss: 10 kB\nPss: 7 kB\nSwapPss: 1 kB\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(7+1)<<10, got)
	_, err = parseSmapsRollupMemory([]byte("Rss: 10 kB\n"))
	assert.ErrorIs(t, err, errProcFormat)
}

func TestParseMemTotal(t *testing.T) {
	got, err := parseMemTotal([]byte("MemTotal:       24684084 kB\nMemFree:        22992216 kB\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(24684084)*1024, got)
	_, err = parseMemTotal([]byte("MemFree: 1 kB\n"))
	assert.ErrorIs(t, err, errProcFormat)
}

func TestParseFlatKeyed(t *testing.T) {
	got, err := parseFlatKeyed([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"oom_kill_disable": 0, "under_oom": 0, "oom_kill": 3}, got)
	got, err = parseFlatKeyed([]byte("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(1500), got["usage_usec"])
	for _, bad := range []string{"max", "a b c", "oom_kill x"} {
		_, err := parseFlatKeyed([]byte(bad))
		assert.ErrorIs(t, err, errProcFormat, bad)
	}
}

func TestParseCgroupValue(t *testing.T) {
	for in, want := range map[string]int64{"max\n": -1, "268435456\n": 268435456, "0": 0} {
		got, err := parseCgroupValue([]byte(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "-5", "12 kB", "maximum"} {
		_, err := parseCgroupValue([]byte(bad))
		assert.ErrorIs(t, err, errProcFormat, bad)
	}
}

func TestParsePIDs(t *testing.T) {
	got, err := parsePIDs([]byte("12 7\n3 "))
	require.NoError(t, err)
	assert.Equal(t, []int{12, 7, 3}, got)
	got, err = parsePIDs(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range []string{"1 x", "0", "-3"} {
		_, err := parsePIDs([]byte(bad))
		assert.ErrorIs(t, err, errProcFormat, bad)
	}
}

func TestParseProcCgroup(t *testing.T) {
	in := "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/9051\n2:cpu,cpuacct:/a b\n0::/user.slice/x.scope\n"
	got, err := parseProcCgroup([]byte(in))
	require.NoError(t, err)
	assert.Equal(t, []procCgroup{
		{ID: 9, Controllers: []string{"name=systemd"}, Path: "/"},
		{ID: 8, Controllers: []string{"pids"}, Path: "/"},
		{ID: 4, Controllers: []string{"memory"}, Path: "/process_api/9051"},
		{ID: 2, Controllers: []string{"cpu", "cpuacct"}, Path: "/a b"},
		{ID: 0, Path: "/user.slice/x.scope"},
	}, got)
	for _, bad := range []string{"4:memory", "x:memory:/", "4:memory:relative"} {
		_, err := parseProcCgroup([]byte(bad))
		assert.ErrorIs(t, err, errProcFormat, bad)
	}
}

func TestParseMountinfo(t *testing.T) {
	in := "36 25 0:31 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory\n" +
		"40 25 0:35 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n" +
		"41 25 0:36 /sub\\040dir /mnt/with\\040space rw master:1 shared:2 - tmpfs tmpfs rw,size=4k\n"
	got, err := parseMountinfo([]byte(in))
	require.NoError(t, err)
	assert.Equal(t, []mountEntry{
		{Root: "/", MountPoint: "/sys/fs/cgroup/memory", FSType: "cgroup", Super: []string{"rw", "memory"}},
		{Root: "/", MountPoint: "/sys/fs/cgroup/unified", FSType: "cgroup2", Super: []string{"rw"}},
		{Root: "/sub dir", MountPoint: "/mnt/with space", FSType: "tmpfs", Super: []string{"rw", "size=4k"}},
	}, got)
	for _, bad := range []string{"36 25 0:31 / /x rw shared:14 cgroup cgroup rw", "1 2 3 4 5 6 - x"} {
		_, err := parseMountinfo([]byte(bad))
		assert.ErrorIs(t, err, errProcFormat, bad)
	}
	assert.Equal(t, `a\b`, unescapeMountPath(`a\134b`))
	assert.Equal(t, `a\9`, unescapeMountPath(`a\9`), "not an escape")
	assert.Equal(t, "a\tb\nc", unescapeMountPath(`a\011b\012c`))
}

func TestCgroupDir(t *testing.T) {
	whole := mountEntry{Root: "/", MountPoint: "/sys/fs/cgroup/memory"}
	sub := mountEntry{Root: "/docker/abc", MountPoint: "/sys/fs/cgroup"}
	cases := []struct {
		m    mountEntry
		p    string
		want string
		ok   bool
	}{
		{whole, "/", "/sys/fs/cgroup/memory", true},
		{whole, "/a/b", "/sys/fs/cgroup/memory/a/b", true},
		{whole, "/a/../../b", "/sys/fs/cgroup/memory/b", true},
		{sub, "/docker/abc", "/sys/fs/cgroup", true},
		{sub, "/docker/abc/w1", "/sys/fs/cgroup/w1", true},
		{sub, "/docker/abcd", "", false},
		{sub, "/other", "", false},
	}
	for _, c := range cases {
		got, ok := cgroupDir(c.m, c.p)
		assert.Equal(t, c.ok, ok, "%+v %s", c.m, c.p)
		assert.Equal(t, c.want, got, "%+v %s", c.m, c.p)
	}
}

// The fuzzers feed each parser arbitrary bytes: none may panic, and what
// a parser accepts must hold the invariants the budget relies on.

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1234 (python3) S 1 1234 1234 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 4 0 555 1000 200\n"))
	f.Add([]byte("1 ((x)) Z 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 9"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parseProcStat(b); err == nil && !strings.Contains(string(b), ")") {
			t.Fatalf("accepted %q, which has no command name", b)
		}
	})
}

func FuzzParseProcStatusMemory(f *testing.F) {
	f.Add([]byte("RssAnon:\t 1024 kB\nRssShmem:\t 8 kB\nVmSwap:\t 0 kB\n"))
	f.Add([]byte("RssAnon: 99999999999999999999 kB"))
	f.Add([]byte("Pss: 7 kB\nPss_Anon: 5 kB\nSwapPss: 1 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := parseProcStatusMemory(b); err == nil && v < 0 {
			t.Fatalf("negative memory %d from %q", v, b)
		}
		if v, err := parseSmapsRollupMemory(b); err == nil && v < 0 {
			t.Fatalf("negative PSS %d from %q", v, b)
		}
	})
}

func FuzzParseCgroupFiles(f *testing.F) {
	f.Add([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"))
	f.Add([]byte("max\n"))
	f.Add([]byte("12 7\n3"))
	f.Add([]byte("MemTotal: 1 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseFlatKeyed(b)
		if v, err := parseCgroupValue(b); err == nil && v < -1 {
			t.Fatalf("value %d from %q", v, b)
		}
		if pids, err := parsePIDs(b); err == nil {
			for _, p := range pids {
				if p <= 0 {
					t.Fatalf("pid %d from %q", p, b)
				}
			}
		}
		if v, err := parseMemTotal(b); err == nil && v < 0 {
			t.Fatalf("MemTotal %d from %q", v, b)
		}
	})
}

func FuzzParseProcCgroupAndMountinfo(f *testing.F) {
	f.Add([]byte("4:memory:/process_api/9051\n0::/user.slice\n"), "/process_api/9051/x")
	f.Add([]byte("36 25 0:31 /a\\040b /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"), "/a b/../../c")
	f.Fuzz(func(t *testing.T, b []byte, p string) {
		parseProcCgroup(b)
		mounts, err := parseMountinfo(b)
		if err != nil {
			return
		}
		for _, m := range mounts {
			// The sandbox makes its cgroups in the directory cgroupDir
			// returns: it must never lie outside the mount.
			if d, ok := cgroupDir(m, p); ok {
				mp := path.Clean(m.MountPoint)
				if d != mp && !strings.HasPrefix(d, strings.TrimSuffix(mp, "/")+"/") {
					t.Fatalf("cgroupDir(%+v, %q) = %q, outside the mount", m, p, d)
				}
			}
		}
	})
}
