package safetensors

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// This file uses only the API that predates Tensor.Fill, so that the
// digests pinned in stream_test.go could be computed with the writer
// before streaming (WriteCheckpoint of Float32 tensors) from the same
// tensors.

// streamSet returns tensors of dtype dt ("mixed": F32, BF16, F16 and an
// I32 given raw) with values from a fixed integer hash, so that the
// bytes written are the same on every platform.
func streamSet(dt DType) []Tensor {
	vals := func(k, n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			x := uint32(i)*2654435761 + uint32(k)*40503
			v[i] = float32(int32(x)) / (1 << 24)
		}
		return v
	}
	special := []float32{
		float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)),
		1e-40, 65504, 65520, 3.14159, 1 + 0x1p-8, 1 + 3*0x1p-8,
	}
	pick := func(mixed DType) DType {
		if dt == "mixed" {
			return mixed
		}
		return dt
	}
	// a.big crosses the encoder's chunks (chunkBytes/4 floats) and is
	// larger than the smaller shard sizes of streamCases.
	ts := []Tensor{
		{Name: "model.a.big", DType: pick(BF16), Shape: []int{300, 250}, Float32: vals(0, 75000)},
		{Name: "model.b.mid", DType: pick(F32), Shape: []int{10, 100}, Float32: vals(1, 1000)},
		{Name: "model.c.small", DType: pick(F16), Shape: []int{7}, Float32: vals(2, 7)},
		{Name: "model.d.scalar", DType: pick(F32), Float32: []float32{-2.5}},
		{Name: "model.e.empty", DType: pick(BF16), Shape: []int{0, 4}},
		{Name: "model.f.vec", DType: pick(BF16), Shape: []int{513}, Float32: vals(5, 513)},
		{Name: "model.g.special", DType: pick(F32), Shape: []int{2, 5}, Float32: special},
		{Name: "lm_head.weight", DType: pick(F32), Shape: []int{64, 32}, Float32: vals(7, 2048)},
	}
	if dt == "mixed" {
		raw := make([]byte, 4*6)
		for i := range 6 {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(i*i)-3)
		}
		ts = append(ts, Tensor{Name: "model.h.ids", DType: I32, Shape: []int{2, 3}, Raw: raw})
	}
	return ts
}

// dirDigest is the SHA-256 of dir's files, names and contents, in name
// order.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}
