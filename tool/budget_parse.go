package tool

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Parsers of the kernel's text files that the call budget reads: /proc's
// per-process stat and status, /proc/meminfo, /proc/self/cgroup,
// /proc/self/mountinfo and cgroup interface files. They take bytes and
// never panic (fuzz_test.go fuzzes each), so that a file of an unexpected
// shape is an error, not a crash.

// procStat is what the call budget reads from /proc/<pid>/stat.
type procStat struct {
	State    byte  // R, S, D, Z, ...
	PPID     int   // parent
	CPU      int64 // utime + stime, in clock ticks
	ChildCPU int64 // cutime + cstime: waited-for children, in clock ticks
	Threads  int   // num_threads
	Start    int64 // starttime, in clock ticks after boot: with the pid, the process's identity
}

// errProcFormat reports a /proc or cgroup file whose text does not parse.
var errProcFormat = errors.New("unexpected format")

// parseProcStat parses /proc/<pid>/stat (proc(5)). The command name, in
// parentheses, may hold any byte, spaces and parentheses included, so the
// fields are counted from the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("stat: no ')' after the command name: %w", errProcFormat)
	}
	f := strings.Fields(string(b[i+1:]))
	// Fields from 3 (state) on; starttime is field 22, index 19 here.
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("stat: %d fields after the command name, want at least 20: %w", len(f), errProcFormat)
	}
	num := func(k int) (int64, error) {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: field %d: %w", k+3, errProcFormat)
		}
		return v, nil
	}
	var v [6]int64
	for j, k := range []int{1, 11, 12, 13, 14, 17} {
		x, err := num(k)
		if err != nil {
			return procStat{}, err
		}
		v[j] = x
	}
	start, err := num(19)
	if err != nil {
		return procStat{}, err
	}
	return procStat{State: f[0][0], PPID: int(v[0]), CPU: v[1] + v[2], ChildCPU: v[3] + v[4], Threads: int(v[5]), Start: start}, nil
}

// parseProcStatusMemory returns the memory a process holds as the
// watchdog counts it, from /proc/<pid>/status: RssAnon + RssShmem +
// VmSwap, in bytes. File-backed pages (the interpreter, libraries, page
// cache) are left out: they are shared with the host and reclaimable.
// Fields a kernel does not show count as 0.
func parseProcStatusMemory(b []byte) (int64, error) {
	var total int64
	for line := range strings.SplitSeq(string(b), "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || (key != "RssAnon" && key != "RssShmem" && key != "VmSwap") {
			continue
		}
		kb, err := parseKB(rest)
		if err != nil {
			return 0, fmt.Errorf("status: %s: %w", key, err)
		}
		total += kb
	}
	return total, nil
}

// parseSmapsRollupMemory returns the memory a process holds as the
// watchdog counts it when the cheap sum is over the budget, from
// /proc/<pid>/smaps_rollup: Pss_Anon + Pss_Shmem + SwapPss, in bytes —
// proportional set sizes, so that pages a fork shares among the call's
// processes count once in all. Kernels before 5.10 show no Pss_Anon:
// Pss (file-backed pages included) + SwapPss then.
func parseSmapsRollupMemory(b []byte) (int64, error) {
	v := map[string]int64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		key, rest, ok := strings.Cut(line, ":")
		switch key {
		case "Pss", "Pss_Anon", "Pss_Shmem", "SwapPss":
		default:
			continue
		}
		if !ok {
			continue
		}
		kb, err := parseKB(rest)
		if err != nil {
			return 0, fmt.Errorf("smaps_rollup: %s: %w", key, err)
		}
		v[key] = kb
	}
	pss, ok := v["Pss"]
	if !ok {
		return 0, fmt.Errorf("smaps_rollup: no Pss: %w", errProcFormat)
	}
	if anon, ok := v["Pss_Anon"]; ok {
		return anon + v["Pss_Shmem"] + v["SwapPss"], nil
	}
	return pss + v["SwapPss"], nil
}

// parseKB parses " 1234 kB" into bytes.
func parseKB(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("%q is not a size in kB: %w", s, errProcFormat)
	}
	v, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || v < 0 || v > 1<<53 {
		return 0, fmt.Errorf("%q is not a size in kB: %w", s, errProcFormat)
	}
	return v << 10, nil
}

// parseMemTotal returns MemTotal from /proc/meminfo, in bytes.
func parseMemTotal(b []byte) (int64, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			return parseKB(rest)
		}
	}
	return 0, fmt.Errorf("meminfo: no MemTotal: %w", errProcFormat)
}

// parseFlatKeyed parses a cgroup file of "key value" lines (memory.events,
// memory.oom_control, pids.events, cpu.stat, memory.stat).
func parseFlatKeyed(b []byte) (map[string]int64, error) {
	m := map[string]int64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %q is not \"key value\": %w", line, errProcFormat)
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, errProcFormat)
		}
		m[f[0]] = v
	}
	return m, nil
}

// parseCgroupValue parses a cgroup file holding one number, or "max"
// (returned as -1): memory.peak, pids.current, cpuacct.usage, ...
func parseCgroupValue(b []byte) (int64, error) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a cgroup value: %w", s, errProcFormat)
	}
	return v, nil
}

// parsePIDs parses a list of process ids separated by white space
// (/proc/<pid>/task/<tid>/children, cgroup.procs).
func parsePIDs(b []byte) ([]int, error) {
	f := strings.Fields(string(b))
	out := make([]int, 0, len(f))
	for _, s := range f {
		p, err := strconv.Atoi(s)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("%q is not a process id: %w", s, errProcFormat)
		}
		out = append(out, p)
	}
	return out, nil
}

// procCgroup is one line of /proc/<pid>/cgroup: hierarchy-ID, the
// controllers bound to the hierarchy (none for cgroup v2's "0::") and the
// process's path in it.
type procCgroup struct {
	ID          int
	Controllers []string
	Path        string
}

// parseProcCgroup parses /proc/<pid>/cgroup (cgroups(7)).
func parseProcCgroup(b []byte) ([]procCgroup, error) {
	var out []procCgroup
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok := strings.Cut(line, ":")
		ctl, p, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("cgroup line %q is not id:controllers:/path: %w", line, errProcFormat)
		}
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("cgroup line %q: hierarchy id: %w", line, errProcFormat)
		}
		e := procCgroup{ID: n, Path: p}
		if ctl != "" {
			e.Controllers = strings.Split(ctl, ",")
		}
		out = append(out, e)
	}
	return out, nil
}

// mountEntry is what the call budget uses of a /proc/self/mountinfo line.
type mountEntry struct {
	Root       string   // the path inside the file system that is mounted
	MountPoint string   // where, in this mount namespace
	FSType     string   // "cgroup", "cgroup2", ...
	Super      []string // super options: for cgroup v1, its controllers among them
}

// parseMountinfo parses /proc/<pid>/mountinfo (proc(5)): ten or more
// fields, a variable number of optional fields ended by "-", then the
// file system type, the source and the super options. Paths escape
// space, tab, newline and backslash as octal (\040).
func parseMountinfo(b []byte) ([]mountEntry, error) {
	var out []mountEntry
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+4 {
			return nil, fmt.Errorf("mountinfo line %q: %w", line, errProcFormat)
		}
		out = append(out, mountEntry{
			Root:       unescapeMountPath(f[3]),
			MountPoint: unescapeMountPath(f[4]),
			FSType:     f[sep+1],
			Super:      strings.Split(f[sep+3], ","),
		})
	}
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupDir returns the directory of cgroup path p (as /proc/self/cgroup
// shows it) under mount m, or false when m does not show p: a mount of a
// subtree shows only the paths below its root.
func cgroupDir(m mountEntry, p string) (string, bool) {
	if !path.IsAbs(m.MountPoint) {
		return "", false
	}
	p = path.Clean("/" + p)
	root := path.Clean("/" + m.Root)
	rel, ok := strings.CutPrefix(p, root)
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && root != "/") {
		return "", false
	}
	return path.Join(m.MountPoint, rel), true
}
