package policy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// A sharded optimizer state (ShardedAdamW.SaveStateFile) is a folder of
// files, written by the ranks in parallel:
//
//   - ShardStateIndex, JSON (ShardIndex), written by rank 0: the format,
//     the world size and unit of the partition, the step count, the
//     hyperparameters, the trainable parameters' names and sizes in
//     Params order, and the shard files;
//   - one ShardFileName(r, n) per rank r of n: a safetensors file whose
//     F32 tensors "exp_avg" and "exp_avg_sq" hold the moments of rank
//     r's blocks, unit after unit, padding excluded, with metadata
//     "format" = ShardStateFormat, "step", "rank", "world_size", "unit"
//     and "elements"; with ShardOptions.BF16Weights (the index's
//     "master") a third, "master", the float32 master weights of the
//     same blocks.
//
// Every optimizer of this package reads both layouts, whatever the
// number of ranks that wrote it: a ShardedAdamW takes its blocks under
// its own partition from either, AdamW and DeviceAdamW the whole state
// (ConsolidateState makes the unsharded file from the shards, as
// DeepSpeed's zero_to_fp32 does for its checkpoints). The master
// weights are read by a ShardedAdamW with ShardOptions.BF16Weights only;
// for any other optimizer they are the weights to load (LoadParams)
// from MasterWeights.
const (
	ShardStateIndex       = "optimizer.shards.json"
	ShardStateFormat      = "agentrl.adamw.shard.v1"
	ShardStateIndexFormat = "agentrl.adamw.shards.v1"
)

// ShardFileName is the name of rank's shard file in a job of ranks.
func ShardFileName(rank, ranks int) string {
	return fmt.Sprintf("optimizer-shard-%05d-of-%05d.safetensors", rank, ranks)
}

// ShardIndex is the content of ShardStateIndex.
type ShardIndex struct {
	Format string `json:"format"`
	// WorldSize and Unit are the partition's (ShardedAdamW): the number
	// of ranks and the floats of a unit.
	WorldSize int `json:"world_size"`
	Unit      int `json:"unit"`
	// Step is the optimizer's update count.
	Step int64 `json:"step"`
	// Hyperparameters are the unsharded state file's metadata keys (lr,
	// beta1, beta2, eps, weight_decay), for inspection.
	Hyperparameters map[string]string `json:"hyperparameters"`
	// Params are the trainable parameters in Params order.
	Params []ShardParam `json:"params"`
	// Files are the shard files, rank by rank.
	Files []string `json:"files"`
	// Master: the shard files hold the float32 master weights of their
	// blocks too (ShardOptions.BF16Weights, whose model's weights are
	// bf16).
	Master bool `json:"master,omitempty"`
}

// ShardParam is one trainable parameter of a ShardIndex.
type ShardParam struct {
	Name string `json:"name"`
	Size int    `json:"size"`
}

// hyperparameters are cfg's metadata strings of a state file.
func (c AdamWConfig) hyperparameters() map[string]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return map[string]string{"beta1": f(c.Beta1), "beta2": f(c.Beta2), "eps": f(c.Eps), "weight_decay": f(c.WeightDecay), "lr": f(c.LR)}
}

// SaveStateFile writes this rank's shard of the moments to
// dir/ShardFileName(rank, ranks) and, on rank 0, the index
// (ShardStateIndex), each atomically and durably; rank 0 removes an
// unsharded state file (StateFileName) left in dir. Every rank of the
// job writes its own into the same folder, which they must all see (a
// shared file system), with no collective: the caller knows when they
// are all done.
//
// With ShardOptions.BF16Weights the shard holds the master weights of
// the blocks too (the model's weights, which a checkpoint saves through
// Params, are their bf16 rounding).
func (s *ShardedAdamW) SaveStateFile(dir string) error {
	return s.core.locked(func() error {
		lay := s.lay
		be := s.core.model.be
		n := lay.owned(lay.rank)
		m, v := make([]float32, 0, n), make([]float32, 0, n)
		var master []float32
		if s.master != nil {
			master = make([]float32, 0, n)
		}
		block := make([]float32, lay.block)
		for u := range lay.units {
			lo, hi := lay.own(lay.rank, u)
			parts := []struct {
				dst *[]float32
				src backend.Buffer
			}{{&m, s.mom[u]}, {&v, s.vel[u]}}
			if s.master != nil {
				parts = append(parts, struct {
					dst *[]float32
					src backend.Buffer
				}{&master, s.master[u]})
			}
			for _, x := range parts {
				if err := be.Download(block, x.src, 0); err != nil {
					return fmt.Errorf("policy: downloading the moments' shard: %w", err)
				}
				*x.dst = append(*x.dst, block[:hi-lo]...)
			}
		}
		meta := s.core.cfg.hyperparameters()
		meta["format"] = ShardStateFormat
		meta["step"] = strconv.FormatInt(s.core.step, 10)
		meta["rank"] = strconv.Itoa(lay.rank)
		meta["world_size"] = strconv.Itoa(lay.ranks)
		meta["unit"] = strconv.Itoa(lay.unit)
		meta["elements"] = strconv.Itoa(lay.total)
		ts := []safetensors.Tensor{
			{Name: "exp_avg", DType: safetensors.F32, Shape: []int{n}, Float32: m},
			{Name: "exp_avg_sq", DType: safetensors.F32, Shape: []int{n}, Float32: v},
		}
		if master != nil {
			ts = append(ts, safetensors.Tensor{Name: "master", DType: safetensors.F32, Shape: []int{n}, Float32: master})
		}
		path := filepath.Join(dir, ShardFileName(lay.rank, lay.ranks))
		if err := atomicfile.Write(path, 0o600, func(w io.Writer) error { return safetensors.Write(w, ts, meta) }); err != nil {
			return fmt.Errorf("policy: optimizer shard: %w", err)
		}
		if lay.rank != 0 {
			return nil
		}
		idx := ShardIndex{Format: ShardStateIndexFormat, WorldSize: lay.ranks, Unit: lay.unit, Step: s.core.step, Hyperparameters: s.core.cfg.hyperparameters(),
			Master: s.master != nil}
		for _, p := range s.core.params {
			idx.Params = append(idx.Params, ShardParam{Name: p.spec.Name, Size: len(p.data)})
		}
		for r := range lay.ranks {
			idx.Files = append(idx.Files, ShardFileName(r, lay.ranks))
		}
		b, err := json.MarshalIndent(idx, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, ShardStateIndex), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("policy: optimizer shard index: %w", err)
		}
		if err := os.Remove(filepath.Join(dir, StateFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("policy: removing a stale %s: %w", StateFileName, err)
		}
		return nil
	})
}

// LoadStateFile reads the moments of this rank's blocks, under its own
// partition, from dir: from a sharded state written by any number of
// ranks (resharded), or from an unsharded one (StateFileName). The
// trainable parameters must be those of the state, by name and size, in
// order. On error the optimizer is unchanged.
//
// With ShardOptions.BF16Weights the master weights of the blocks come
// from the state too when it has them (written with the option, at any
// number of ranks); a state without them leaves the master weights as
// LoadParams set them (the checkpoint's weights, bf16-rounded when they
// were saved with the option). Without the option only the moments are
// read, and the weights stay what LoadParams set: to resume a state
// that holds master weights (StateInfo.Master), set them from the
// master (MasterWeights), not from the checkpoint's bf16 rounding of
// it, as the trainers of package agentrl do.
func (s *ShardedAdamW) LoadStateFile(dir string) error {
	src, err := openMoments(dir, s.core.params)
	if err != nil {
		return err
	}
	defer src.close()
	return s.core.locked(func() error {
		lay := s.lay
		be := s.core.model.be
		m, v := make([][]float32, lay.units), make([][]float32, lay.units)
		var master [][]float32
		if s.master != nil && src.master {
			master = make([][]float32, lay.units)
		}
		for u := range lay.units {
			lo, hi := lay.own(lay.rank, u)
			m[u], v[u] = make([]float32, lay.block), make([]float32, lay.block)
			if err := src.read(lo, hi, m[u][:hi-lo], v[u][:hi-lo]); err != nil {
				return err
			}
			if master != nil {
				master[u] = make([]float32, lay.block)
				if err := src.readMaster(lo, hi, master[u][:hi-lo]); err != nil {
					return err
				}
			}
		}
		for u := range lay.units {
			if err := be.Upload(s.mom[u], 0, m[u]); err != nil {
				return err
			}
			if err := be.Upload(s.vel[u], 0, v[u]); err != nil {
				return err
			}
			if master != nil {
				if err := be.Upload(s.master[u], 0, master[u]); err != nil {
					return err
				}
			}
		}
		s.core.step = src.step
		return nil
	})
}

// ConsolidateState writes the optimizer state saved in dir — sharded or
// not — to w in the unsharded format (StateFormat, what
// AdamW.SaveState writes), whatever the number of ranks that wrote it.
// It streams: one parameter's moment is read at a time, so that it holds
// the largest parameter in float32 (plus about a MiB), not the state.
//
// The unsharded format holds the moments only: the master weights of a
// state saved with ShardOptions.BF16Weights (StateInfo.Master) are not
// in it, since one process's float32 weights are their own master.
// MasterWeights reads them, to be the weights of a checkpoint for one
// process (which then resumes from the master, not from its bf16
// rounding).
func ConsolidateState(dir string, w io.Writer) error {
	idx, err := readShardIndex(dir)
	if errors.Is(err, fs.ErrNotExist) {
		f, err := os.Open(filepath.Join(dir, StateFileName))
		if err != nil {
			return fmt.Errorf("policy: optimizer state: %w", err)
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	}
	if err != nil {
		return err
	}
	src, err := openShards(dir, idx)
	if err != nil {
		return err
	}
	defer src.close()
	// All exp_avg.* sort before all exp_avg_sq.*, so Write reads every
	// parameter's first moment, then every second one, one at a time.
	ts := make([]safetensors.Tensor, 0, 2*len(idx.Params))
	off := 0
	for _, p := range idx.Params {
		lo, hi := off, off+p.Size
		off = hi
		shape := []int{p.Size}
		ts = append(ts,
			safetensors.Tensor{Name: "exp_avg." + p.Name, DType: safetensors.F32, Shape: shape,
				Fill: func(dst []float32) error { return src.read(lo, hi, dst, nil) }},
			safetensors.Tensor{Name: "exp_avg_sq." + p.Name, DType: safetensors.F32, Shape: shape,
				Fill: func(dst []float32) error { return src.read(lo, hi, nil, dst) }})
	}
	meta := map[string]string{}
	for k, v := range idx.Hyperparameters {
		meta[k] = v
	}
	meta["format"] = StateFormat
	meta["step"] = strconv.FormatInt(idx.Step, 10)
	return safetensors.Write(w, ts, meta)
}

// StateInfo describes the optimizer state saved in a folder
// (ReadStateInfo).
type StateInfo struct {
	// WorldSize is the number of ranks that wrote a sharded state
	// (ShardStateIndex), 0 for an unsharded one (StateFileName).
	WorldSize int
	// Step is the optimizer's update count.
	Step int64
	// Params are the trainable parameters whose moments it holds: in
	// Params order for a sharded state, in the file's order for an
	// unsharded one.
	Params []ShardParam
	// Master: the sharded state holds the float32 master weights of the
	// parameters too (ShardIndex.Master, a state saved with
	// ShardOptions.BF16Weights), which MasterWeights reads; every shard
	// file has them, checked as the moments are.
	Master bool
}

// ReadStateInfo reads and checks the headers of the optimizer state
// saved in dir, sharded or not, without reading the moments: a sharded
// state's index, and every shard file it lists present, whole and in
// agreement with it (rank, world size, step, unit, sizes; the master
// weights' tensor when the index says the state has them); an unsharded
// state file's format, step and pairs of F32 moments.
func ReadStateInfo(dir string) (StateInfo, error) {
	idx, err := readShardIndex(dir)
	switch {
	case err == nil:
		src, err := openShards(dir, idx)
		if err != nil {
			return StateInfo{}, err
		}
		src.close()
		return StateInfo{WorldSize: idx.WorldSize, Step: idx.Step, Params: idx.Params, Master: idx.Master}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return StateInfo{}, err
	}
	f, err := safetensors.Open(filepath.Join(dir, StateFileName))
	if err != nil {
		return StateInfo{}, fmt.Errorf("policy: optimizer state: %w", err)
	}
	defer f.Close()
	bad := func(format string, args ...any) (StateInfo, error) {
		return StateInfo{}, fmt.Errorf("policy: optimizer state: %s: "+format, append([]any{StateFileName}, args...)...)
	}
	meta := f.Metadata()
	if meta["format"] != StateFormat {
		return bad("format %q, want %q", meta["format"], StateFormat)
	}
	var info StateInfo
	if info.Step, err = strconv.ParseInt(meta["step"], 10, 64); err != nil || info.Step < 0 {
		return bad("step %q is not a non-negative integer", meta["step"])
	}
	ts := f.Tensors()
	for _, t := range ts {
		name, ok := strings.CutPrefix(t.Name, "exp_avg.")
		if !ok {
			continue
		}
		sq, ok := f.Info("exp_avg_sq." + name)
		if t.DType != safetensors.F32 || !ok || sq.DType != safetensors.F32 || sq.NumElements() != t.NumElements() {
			return bad("the moments of %q are not two F32 tensors of one size", name)
		}
		info.Params = append(info.Params, ShardParam{Name: name, Size: t.NumElements()})
	}
	if len(ts) != 2*len(info.Params) {
		return bad("%d tensors are not the two moments of %d parameters", len(ts), len(info.Params))
	}
	return info, nil
}

// MasterWeights reads the float32 master weights that a sharded
// optimizer state saved with ShardOptions.BF16Weights holds
// (StateInfo.Master), each parameter's joined from the blocks of every
// rank, whatever their number: the trained weights, of which a
// checkpoint's model weights are the bf16 rounding. It reads one
// parameter at a time from the files, holding none. A MasterWeights is
// not safe for concurrent use.
type MasterWeights struct {
	src *momentSource
	// at maps a parameter's name to its range of the flat vector.
	at map[string][2]int
}

// OpenMasterWeights opens the master weights of the optimizer state
// saved in dir, after checking its index and every shard file as
// ReadStateInfo does. A state without them (an unsharded one, or one
// saved without ShardOptions.BF16Weights) is an error.
func OpenMasterWeights(dir string) (*MasterWeights, error) {
	idx, err := readShardIndex(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("policy: master weights: the optimizer state in %s is not sharded, and only a sharded one holds them: %w", dir, err)
	}
	if err != nil {
		return nil, err
	}
	if !idx.Master {
		return nil, fmt.Errorf("policy: master weights: %s says the state holds none (it was saved without ShardOptions.BF16Weights)", ShardStateIndex)
	}
	src, err := openShards(dir, idx)
	if err != nil {
		return nil, err
	}
	w := &MasterWeights{src: src, at: make(map[string][2]int, len(idx.Params))}
	off := 0
	for _, p := range idx.Params {
		if _, dup := w.at[p.Name]; dup {
			src.close()
			return nil, fmt.Errorf("policy: optimizer state: %s: parameter %q twice", ShardStateIndex, p.Name)
		}
		w.at[p.Name] = [2]int{off, off + p.Size}
		off += p.Size
	}
	return w, nil
}

// Has reports whether the state holds the master weights of the
// parameter name.
func (w *MasterWeights) Has(name string) bool {
	_, ok := w.at[name]
	return ok
}

// ReadFloat32 fills dst with the master weights of the parameter name,
// whose size len(dst) must be.
func (w *MasterWeights) ReadFloat32(name string, dst []float32) error {
	r, ok := w.at[name]
	if !ok {
		return fmt.Errorf("policy: master weights: no parameter %q in the optimizer state", name)
	}
	if n := r[1] - r[0]; len(dst) != n {
		return fmt.Errorf("policy: master weights: parameter %q holds %d floats, not %d", name, n, len(dst))
	}
	return w.src.readMaster(r[0], r[1], dst)
}

// Close closes the shard files.
func (w *MasterWeights) Close() error {
	w.src.close()
	return nil
}

// momentSource reads ranges of the flat moments of a saved state.
type momentSource struct {
	step  int64
	files []*safetensors.File
	// locate maps a flat range to the file, tensor offset and length of
	// each of its pieces, in order.
	locate func(lo, hi int, f func(file, off, n int) error) error
	// names of the tensors in each file: the moments of a piece.
	names func(file, piece int) (m, v string)
	// master: the files hold the master weights too, as tensor "master"
	// (a sharded state of ShardOptions.BF16Weights).
	master bool
	// buf is readF32Range's, made on its first call.
	buf []byte
}

func (src *momentSource) close() {
	for _, f := range src.files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// read fills m and v with the moments of the flat range [lo, hi); a nil
// m or v is not read.
func (src *momentSource) read(lo, hi int, m, v []float32) error {
	at := 0
	piece := 0
	return src.locate(lo, hi, func(file, off, n int) error {
		mn, vn := src.names(file, piece)
		piece++
		for _, x := range []struct {
			name string
			dst  []float32
		}{{mn, m}, {vn, v}} {
			if x.dst == nil {
				continue
			}
			if err := src.readF32Range(src.files[file], x.name, off, x.dst[at:at+n]); err != nil {
				return err
			}
		}
		at += n
		return nil
	})
}

// readMaster fills dst with the master weights of the flat range
// [lo, hi); src.master must be set.
func (src *momentSource) readMaster(lo, hi int, dst []float32) error {
	at := 0
	return src.locate(lo, hi, func(file, off, n int) error {
		if err := src.readF32Range(src.files[file], "master", off, dst[at:at+n]); err != nil {
			return err
		}
		at += n
		return nil
	})
}

// readF32Range reads len(dst) floats of the F32 tensor name of f from
// element off, through src's buffer of 256 KiB.
func (src *momentSource) readF32Range(f *safetensors.File, name string, off int, dst []float32) error {
	if len(dst) == 0 {
		return nil
	}
	sec, err := f.Section(name)
	if err != nil {
		return fmt.Errorf("policy: optimizer state: %w", err)
	}
	if src.buf == nil {
		src.buf = make([]byte, 1<<18)
	}
	for done := 0; done < len(dst); {
		part := dst[done:min(len(dst), done+len(src.buf)/4)]
		b := src.buf[:4*len(part)]
		if _, err := sec.ReadAt(b, 4*int64(off+done)); err != nil {
			return fmt.Errorf("policy: optimizer state: reading %s[%d:%d]: %w", name, off, off+len(dst), err)
		}
		for i := range part {
			part[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		done += len(part)
	}
	return nil
}

// openMoments opens the state saved in dir for parameters params: the
// sharded layout when dir has ShardStateIndex, else StateFileName.
func openMoments(dir string, params []*param) (*momentSource, error) {
	idx, err := readShardIndex(dir)
	switch {
	case err == nil:
		if len(idx.Params) != len(params) {
			return nil, fmt.Errorf("policy: optimizer state holds %d parameters, want %d", len(idx.Params), len(params))
		}
		for i, p := range params {
			if q := idx.Params[i]; q.Name != p.spec.Name || q.Size != len(p.data) {
				return nil, fmt.Errorf("policy: optimizer state's parameter %d is %s [%d], want %s [%d]", i, q.Name, q.Size, p.spec.Name, len(p.data))
			}
		}
		return openShards(dir, idx)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	return openUnsharded(dir, params)
}

// openUnsharded opens dir/StateFileName for params.
func openUnsharded(dir string, params []*param) (*momentSource, error) {
	f, err := safetensors.Open(filepath.Join(dir, StateFileName))
	if err != nil {
		return nil, fmt.Errorf("policy: optimizer state: %w", err)
	}
	src := &momentSource{files: []*safetensors.File{f}}
	fail := func(format string, args ...any) (*momentSource, error) {
		src.close()
		return nil, fmt.Errorf("policy: optimizer state: "+format, args...)
	}
	meta := f.Metadata()
	if meta["format"] != StateFormat {
		return fail("format %q, want %q", meta["format"], StateFormat)
	}
	if src.step, err = strconv.ParseInt(meta["step"], 10, 64); err != nil || src.step < 0 {
		return fail("step %q is not a non-negative integer", meta["step"])
	}
	if n := len(f.Tensors()); n != 2*len(params) {
		return fail("%d tensors, want %d for %d parameters", n, 2*len(params), len(params))
	}
	sizes := make([]int, len(params))
	for i, p := range params {
		sizes[i] = len(p.data)
		for _, name := range []string{"exp_avg." + p.spec.Name, "exp_avg_sq." + p.spec.Name} {
			info, ok := f.Info(name)
			if !ok {
				return fail("lacks %q", name)
			}
			if info.DType != safetensors.F32 || info.NumElements() != len(p.data) {
				return fail("%q is %s %v, want F32 [%d]", name, info.DType, info.Shape, len(p.data))
			}
		}
	}
	lay := newShardLayout(sizes, 1, 0, 1)
	var pieces []flatPiece
	src.locate = func(lo, hi int, f func(file, off, n int) error) error {
		pieces = lay.pieces(lo, hi)
		for _, pc := range pieces {
			if err := f(0, pc.off, pc.n); err != nil {
				return err
			}
		}
		return nil
	}
	src.names = func(_, piece int) (string, string) {
		name := params[pieces[piece].i].spec.Name
		return "exp_avg." + name, "exp_avg_sq." + name
	}
	return src, nil
}

// readShardIndex reads and checks dir/ShardStateIndex; an error wrapping
// fs.ErrNotExist when dir has none.
func readShardIndex(dir string) (ShardIndex, error) {
	var idx ShardIndex
	b, err := os.ReadFile(filepath.Join(dir, ShardStateIndex))
	if err != nil {
		return idx, fmt.Errorf("policy: optimizer state: %w", err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return idx, fmt.Errorf("policy: optimizer state: %s: %w", ShardStateIndex, err)
	}
	bad := func(format string, args ...any) (ShardIndex, error) {
		return idx, fmt.Errorf("policy: optimizer state: %s: "+format, append([]any{ShardStateIndex}, args...)...)
	}
	total := 0
	for i, p := range idx.Params {
		if p.Name == "" || p.Size < 0 {
			return bad("parameter %d is %q of %d floats", i, p.Name, p.Size)
		}
		total += p.Size
	}
	switch {
	case idx.Format != ShardStateIndexFormat:
		return bad("format %q, want %q", idx.Format, ShardStateIndexFormat)
	case idx.WorldSize < 1 || idx.WorldSize > 1<<20:
		return bad("world size %d", idx.WorldSize)
	case idx.Unit < idx.WorldSize || idx.Unit%idx.WorldSize != 0:
		return bad("unit %d is not a positive multiple of the %d ranks", idx.Unit, idx.WorldSize)
	case idx.Step < 0:
		return bad("step %d", idx.Step)
	case len(idx.Files) != idx.WorldSize:
		return bad("%d files for %d ranks", len(idx.Files), idx.WorldSize)
	case total > 0 && idx.Unit > (total+idx.WorldSize-1)/idx.WorldSize*idx.WorldSize:
		return bad("unit %d exceeds what %d floats need", idx.Unit, total)
	}
	for r, name := range idx.Files {
		if name != ShardFileName(r, idx.WorldSize) {
			return bad("file %d is %q, want %q", r, name, ShardFileName(r, idx.WorldSize))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, StateFileName)); err == nil {
		return bad("%s is there too: which state is the folder's?", StateFileName)
	}
	return idx, nil
}

// openShards opens the shard files of idx and checks them against it.
func openShards(dir string, idx ShardIndex) (*momentSource, error) {
	sizes := make([]int, len(idx.Params))
	for i, p := range idx.Params {
		sizes[i] = p.Size
	}
	lay := newShardLayout(sizes, idx.WorldSize, 0, idx.Unit)
	if lay.unit != idx.Unit {
		return nil, fmt.Errorf("policy: optimizer state: %s: unit %d does not partition %d floats over %d ranks", ShardStateIndex, idx.Unit, lay.total, idx.WorldSize)
	}
	src := &momentSource{step: idx.Step, files: make([]*safetensors.File, idx.WorldSize), master: idx.Master}
	for r, name := range idx.Files {
		f, err := safetensors.Open(filepath.Join(dir, name))
		if err != nil {
			src.close()
			return nil, fmt.Errorf("policy: optimizer state: rank %d's shard: %w", r, err)
		}
		src.files[r] = f
		meta := f.Metadata()
		want := map[string]string{
			"format": ShardStateFormat, "step": strconv.FormatInt(idx.Step, 10), "rank": strconv.Itoa(r),
			"world_size": strconv.Itoa(idx.WorldSize), "unit": strconv.Itoa(idx.Unit), "elements": strconv.Itoa(lay.total),
		}
		for _, k := range []string{"format", "step", "rank", "world_size", "unit", "elements"} {
			if meta[k] != want[k] {
				src.close()
				return nil, fmt.Errorf("policy: optimizer state: %s: %s %q, the index says %q", name, k, meta[k], want[k])
			}
		}
		n := lay.owned(r)
		tensors := []string{"exp_avg", "exp_avg_sq"}
		if idx.Master {
			tensors = append(tensors, "master")
		}
		for _, t := range tensors {
			info, ok := f.Info(t)
			if !ok {
				src.close()
				if t == "master" {
					return nil, fmt.Errorf("policy: optimizer state: %s lacks the master weights (tensor %q of rank %d's blocks) that %s says the shards hold", name, t, r, ShardStateIndex)
				}
				return nil, fmt.Errorf("policy: optimizer state: %s lacks tensor %q (rank %d's blocks)", name, t, r)
			}
			if info.DType != safetensors.F32 || info.NumElements() != n {
				src.close()
				return nil, fmt.Errorf("policy: optimizer state: %s: %s is not F32 [%d] (rank %d's blocks)", name, t, n, r)
			}
		}
	}
	src.locate = func(lo, hi int, f func(file, off, n int) error) error {
		for k := lo / lay.unit; k*lay.unit < hi; k++ {
			for r := range lay.ranks {
				a, b := lay.own(r, k)
				a, b = max(a, lo), min(b, hi)
				if a >= b {
					continue
				}
				if err := f(r, k*lay.block+a-(k*lay.unit+r*lay.block), b-a); err != nil {
					return err
				}
			}
		}
		return nil
	}
	src.names = func(int, int) (string, string) { return "exp_avg", "exp_avg_sq" }
	return src, nil
}

// consolidated returns the state saved in dir as an unsharded state
// file's bytes (ConsolidateState) when dir holds a sharded one, nil
// when it holds none.
func consolidated(dir string) (*bytes.Reader, error) {
	if _, err := os.Stat(filepath.Join(dir, ShardStateIndex)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := ConsolidateState(dir, &buf); err != nil {
		return nil, err
	}
	return bytes.NewReader(buf.Bytes()), nil
}
