package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentrl/agentrl/internal/atomicfile"
)

// File names of a Hugging Face checkpoint folder (transformers'
// SAFE_WEIGHTS_NAME and SAFE_WEIGHTS_INDEX_NAME).
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// Index is the content of a model.safetensors.index.json: which shard file
// holds each tensor.
type Index struct {
	// TotalSize is metadata.total_size: the bytes of all tensor data.
	TotalSize int64
	// WeightMap maps each tensor name to the base name of its shard.
	WeightMap map[string]string
}

// ReadIndex parses a model.safetensors.index.json. Shard names must be
// plain file names (no directories, no ".."), so that an index cannot point
// outside its folder.
func ReadIndex(r io.Reader) (Index, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxHeaderSize+1))
	if err != nil {
		return Index{}, err
	}
	if len(data) > MaxHeaderSize {
		return Index{}, fmt.Errorf("%w: index larger than %d bytes", ErrInvalid, MaxHeaderSize)
	}
	entries, err := objectEntries(bytes.TrimSpace(data))
	if err != nil {
		return Index{}, fmt.Errorf("%w: index: %w", ErrInvalid, err)
	}
	var idx Index
	for _, e := range entries {
		switch e.key {
		case "metadata":
			if string(e.value) == "null" {
				continue
			}
			meta, err := objectEntries(e.value)
			if err != nil {
				return Index{}, fmt.Errorf("%w: index metadata: %w", ErrInvalid, err)
			}
			for _, m := range meta {
				if m.key != "total_size" {
					continue
				}
				// transformers writes total_size as an integer; some tools
				// write a float with an integral value.
				var v float64
				if err := json.Unmarshal(m.value, &v); err != nil || v < 0 || v != float64(int64(v)) {
					return Index{}, fmt.Errorf("%w: index metadata.total_size %s is not a non-negative integer", ErrInvalid, m.value)
				}
				idx.TotalSize = int64(v)
			}
		case "weight_map":
			wm, err := objectEntries(e.value)
			if err != nil {
				return Index{}, fmt.Errorf("%w: index weight_map: %w", ErrInvalid, err)
			}
			idx.WeightMap = make(map[string]string, len(wm))
			for _, w := range wm {
				var shard string
				if err := json.Unmarshal(w.value, &shard); err != nil {
					return Index{}, fmt.Errorf("%w: index weight_map[%q]: %w", ErrInvalid, w.key, err)
				}
				if shard == "" || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
					return Index{}, fmt.Errorf("%w: index weight_map[%q]: shard %q is not a plain file name", ErrInvalid, w.key, shard)
				}
				idx.WeightMap[w.key] = shard
			}
		}
	}
	if len(idx.WeightMap) == 0 {
		return Index{}, fmt.Errorf("%w: index has no weight_map entries", ErrInvalid)
	}
	return idx, nil
}

// Checkpoint is the set of tensors of a checkpoint folder, in one
// model.safetensors or in shards listed by model.safetensors.index.json.
type Checkpoint struct {
	files  []*File
	where  map[string]*File
	names  []string
	closed bool
}

// OpenCheckpoint opens the safetensors weights of a Hugging Face checkpoint
// folder: the shards of model.safetensors.index.json when it exists, else
// model.safetensors. For shards it checks that the index and the shards
// agree exactly: every listed tensor is in its shard and every tensor of a
// shard is listed for that shard.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	idxPath := filepath.Join(dir, IndexFileName)
	data, err := os.ReadFile(idxPath)
	if errors.Is(err, fs.ErrNotExist) {
		f, err := Open(filepath.Join(dir, SingleFileName))
		if err != nil {
			return nil, err
		}
		return newCheckpoint([]*File{f}), nil
	}
	if err != nil {
		return nil, err
	}
	idx, err := ReadIndex(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", idxPath, err)
	}
	shardNames := make([]string, 0)
	byShard := make(map[string][]string)
	for name, shard := range idx.WeightMap {
		if _, ok := byShard[shard]; !ok {
			shardNames = append(shardNames, shard)
		}
		byShard[shard] = append(byShard[shard], name)
	}
	sort.Strings(shardNames)
	c := &Checkpoint{}
	for _, shard := range shardNames {
		f, err := Open(filepath.Join(dir, shard))
		if err != nil {
			c.Close()
			return nil, err
		}
		c.files = append(c.files, f)
		for _, name := range byShard[shard] {
			if _, ok := f.Info(name); !ok {
				c.Close()
				return nil, fmt.Errorf("%w: %s: tensor %q is listed for shard %s but not in it", ErrInvalid, idxPath, name, shard)
			}
		}
		for _, t := range f.tensors {
			if idx.WeightMap[t.Name] != shard {
				c.Close()
				return nil, fmt.Errorf("%w: %s: shard %s holds tensor %q, which the index does not list for it", ErrInvalid, idxPath, shard, t.Name)
			}
		}
	}
	return newCheckpoint(c.files), nil
}

func newCheckpoint(files []*File) *Checkpoint {
	c := &Checkpoint{files: files, where: make(map[string]*File)}
	for _, f := range files {
		for _, t := range f.tensors {
			c.where[t.Name] = f
			c.names = append(c.names, t.Name)
		}
	}
	sort.Strings(c.names)
	return c
}

// Names lists the tensor names in lexical order.
func (c *Checkpoint) Names() []string { return append([]string(nil), c.names...) }

// Shapes maps every tensor name to its shape (a fresh map; the shape
// slices are shared and must not be modified).
func (c *Checkpoint) Shapes() map[string][]int {
	m := make(map[string][]int, len(c.names))
	for name, f := range c.where {
		t, _ := f.Info(name)
		m[name] = t.Shape
	}
	return m
}

// Info describes the named tensor.
func (c *Checkpoint) Info(name string) (TensorInfo, bool) {
	f, ok := c.where[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Info(name)
}

// Float32 reads the named F32, F16 or BF16 tensor as float32.
func (c *Checkpoint) Float32(name string) ([]float32, error) {
	f, ok := c.where[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return f.Float32(name)
}

// ReadFloat32 reads the named F32, F16 or BF16 tensor into dst, which holds
// exactly its element count.
func (c *Checkpoint) ReadFloat32(name string, dst []float32) error {
	f, ok := c.where[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return f.ReadFloat32(name, dst)
}

// Raw reads the named tensor's bytes.
func (c *Checkpoint) Raw(name string) ([]byte, error) {
	f, ok := c.where[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return f.Raw(name)
}

// Close closes every shard.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// WriteCheckpoint writes tensors into dir as Hugging Face does
// (transformers' save_pretrained with max_shard_size): one model.safetensors
// when all data fits in maxShardBytes (or maxShardBytes ≤ 0), otherwise
// model-00001-of-0000N.safetensors shards filled in Write's order and a
// model.safetensors.index.json. metadata goes into every file; transformers
// expects {"format": "pt"}, which is added when absent. The shards and
// their headers are laid out from the tensors' names, dtypes and shapes
// before any data is written, and the data is streamed: tensors given by
// Fill are read one at a time, so that the writer holds one of them (plus
// about a MiB of buffers), not the model. Every file is written aside and
// renamed into place only once all are complete, so that a failure (a
// Fill's error included) leaves dir as it was; then a model.safetensors
// or index left by an earlier save that would shadow the new files is
// removed.
func WriteCheckpoint(dir string, tensors []Tensor, metadata map[string]string, maxShardBytes int64) error {
	meta := map[string]string{"format": "pt"}
	for k, v := range metadata {
		meta[k] = v
	}
	lay, err := buildHeader(tensors, meta)
	if err != nil {
		return err
	}
	var shards [][]Tensor
	var cur []Tensor
	var curBytes, total int64
	for _, i := range lay.order {
		n := lay.sizes[i]
		if maxShardBytes > 0 && len(cur) > 0 && curBytes+n > maxShardBytes {
			shards = append(shards, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, tensors[i])
		curBytes += n
		total += n
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur)
	}
	names := []string{SingleFileName}
	stale := IndexFileName // a stale index would make OpenCheckpoint read old shards
	if len(shards) > 1 {
		names = names[:0]
		for k := range shards {
			names = append(names, fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, len(shards)))
		}
		// transformers looks for model.safetensors before the index: a
		// stale single file would shadow the new shards.
		stale = SingleFileName
	}
	layouts := make([]layout, len(shards))
	for k, ts := range shards {
		if layouts[k], err = buildHeader(ts, meta); err != nil {
			return err
		}
	}
	var staged []*atomicfile.Staged
	defer func() {
		for _, f := range staged {
			f.Abort() // after Commit, nothing
		}
	}()
	stage := func(name string, write func(io.Writer) error) error {
		f, err := atomicfile.Stage(filepath.Join(dir, name), 0o644, write)
		if err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
		staged = append(staged, f)
		return nil
	}
	s := newStreamer(tensors)
	for k, ts := range shards {
		if err := stage(names[k], func(w io.Writer) error { return s.write(w, ts, layouts[k]) }); err != nil {
			return err
		}
	}
	if len(shards) > 1 {
		weightMap := make(map[string]string)
		for k, ts := range shards {
			for _, t := range ts {
				weightMap[t.Name] = names[k]
			}
		}
		idx := struct {
			Metadata  map[string]int64  `json:"metadata"`
			WeightMap map[string]string `json:"weight_map"`
		}{map[string]int64{"total_size": total}, weightMap}
		data, err := json.MarshalIndent(idx, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		if err := stage(IndexFileName, func(w io.Writer) error {
			_, err := w.Write(data)
			return err
		}); err != nil {
			return err
		}
	}
	for _, f := range staged {
		if err := f.Commit(); err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(dir, stale)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
