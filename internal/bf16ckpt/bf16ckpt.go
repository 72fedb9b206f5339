// Package bf16ckpt writes, for tests, the trainer checkpoint that a job
// with bf16 weights and sharded float32 master weights
// (agentrl.DataParallel.ZeROBF16Weights, policy.ShardOptions.BF16Weights)
// saves, made from a float32 job's checkpoint: the CPU backend cannot
// train with bf16 weights, so the tests that read such checkpoints
// build them from a float32 run, whose weights are then the master.
package bf16ckpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// Round rounds x to the nearest bfloat16, ties to even, and widens it
// back to float32 (safetensors.Float32ToBF16, the conversion a model's
// bf16 weights are saved with): what those weights read as float32.
func Round(x float32) float32 {
	return safetensors.BF16ToFloat32(safetensors.Float32ToBF16(x))
}

// Write makes dst, a new folder, the checkpoint that a job of ranks
// ranks with bf16 weights would have saved if its float32 master
// weights were the weights of src, a trainer checkpoint whose optimizer
// state is sharded (a ZeRO job's, at any number of ranks):
//
//   - src's files, except the optimizer state;
//   - the params file holding src's weights rounded to bf16 (Round: what
//     the job's Params give);
//   - the trainer state's world size set to ranks (omitted for one, as
//     one process writes it);
//   - the optimizer state sharded over ranks in units of unit floats (a
//     multiple of ranks), in the format policy documents
//     (optim_shard_state.go): the index, with "master" when master is
//     set, and per rank r a file whose F32 tensors "exp_avg",
//     "exp_avg_sq" and, with master, "master" hold block r of every unit
//     of src's moments and weights, flat in the index's order, unit
//     after unit, padding excluded.
//
// Without master the checkpoint holds the bf16 rounding and no master:
// what a resume that ignored the master would read.
func Write(src, dst string, ranks, unit int, master bool) error {
	if ranks < 1 || unit < ranks || unit%ranks != 0 {
		return fmt.Errorf("bf16ckpt: unit %d is not a positive multiple of %d ranks", unit, ranks)
	}
	b, err := os.ReadFile(filepath.Join(src, policy.ShardStateIndex))
	if err != nil {
		return fmt.Errorf("bf16ckpt: %s needs a sharded optimizer state, for its parameters' order: %w", src, err)
	}
	var idx policy.ShardIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	if idx.Master {
		return fmt.Errorf("bf16ckpt: %s holds master weights already", src)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("bf16ckpt: %s exists", dst)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	entries, err := os.ReadDir(dst)
	if err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	for _, e := range entries {
		if e.Name() == policy.ShardStateIndex || strings.HasPrefix(e.Name(), "optimizer-shard-") {
			if err := os.Remove(filepath.Join(dst, e.Name())); err != nil {
				return fmt.Errorf("bf16ckpt: %w", err)
			}
		}
	}

	// The weights (the master) and the moments, flat in index order.
	var state bytes.Buffer
	if err := policy.ConsolidateState(src, &state); err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	st, err := safetensors.NewReader(bytes.NewReader(state.Bytes()), int64(state.Len()))
	if err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	params, err := safetensors.Open(filepath.Join(src, agentrl.CheckpointParamsFile))
	if err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	defer params.Close()
	var w, m, v []float32
	var rounded []safetensors.Tensor
	for _, p := range idx.Params {
		x, err := params.Float32(p.Name)
		if err != nil {
			return fmt.Errorf("bf16ckpt: %w", err)
		}
		mp, err := st.Float32("exp_avg." + p.Name)
		if err != nil {
			return fmt.Errorf("bf16ckpt: %w", err)
		}
		vp, err := st.Float32("exp_avg_sq." + p.Name)
		if err != nil {
			return fmt.Errorf("bf16ckpt: %w", err)
		}
		r := make([]float32, len(x))
		for i := range x {
			r[i] = Round(x[i])
		}
		rounded = append(rounded, safetensors.Tensor{Name: p.Name, DType: safetensors.F32, Shape: []int{p.Size}, Float32: r})
		w, m, v = append(w, x...), append(m, mp...), append(v, vp...)
	}
	if err := safetensors.WriteFile(filepath.Join(dst, agentrl.CheckpointParamsFile), rounded, params.Metadata()); err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	if err := setWorldSize(filepath.Join(dst, agentrl.CheckpointStateFile), ranks); err != nil {
		return err
	}

	total := len(w)
	block := unit / ranks
	idx.WorldSize, idx.Unit, idx.Master, idx.Files = ranks, unit, master, nil
	for rank := range ranks {
		var ms, vs, ws []float32
		for k := 0; k*unit < total; k++ {
			lo := min(k*unit+rank*block, total)
			hi := min(lo+block, total)
			ms, vs, ws = append(ms, m[lo:hi]...), append(vs, v[lo:hi]...), append(ws, w[lo:hi]...)
		}
		meta := map[string]string{"format": policy.ShardStateFormat, "step": strconv.FormatInt(idx.Step, 10), "rank": strconv.Itoa(rank),
			"world_size": strconv.Itoa(ranks), "unit": strconv.Itoa(unit), "elements": strconv.Itoa(total)}
		ts := []safetensors.Tensor{
			{Name: "exp_avg", DType: safetensors.F32, Shape: []int{len(ms)}, Float32: ms},
			{Name: "exp_avg_sq", DType: safetensors.F32, Shape: []int{len(vs)}, Float32: vs},
		}
		if master {
			ts = append(ts, safetensors.Tensor{Name: "master", DType: safetensors.F32, Shape: []int{len(ws)}, Float32: ws})
		}
		name := policy.ShardFileName(rank, ranks)
		if err := safetensors.WriteFile(filepath.Join(dst, name), ts, meta); err != nil {
			return fmt.Errorf("bf16ckpt: %w", err)
		}
		idx.Files = append(idx.Files, name)
	}
	b, err = json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dst, policy.ShardStateIndex), b, 0o644); err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	return nil
}

// setWorldSize sets the "world_size" of the trainer state file at path
// to ranks, or removes it for one.
func setWorldSize(path string, ranks int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("bf16ckpt: %s: %w", path, err)
	}
	st["world_size"] = ranks
	if ranks == 1 {
		delete(st, "world_size")
	}
	if b, err = json.Marshal(st); err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("bf16ckpt: %w", err)
	}
	return nil
}
