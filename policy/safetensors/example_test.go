package safetensors_test

import (
	"bytes"
	"fmt"
	"os"

	"github.com/agentrl/agentrl/policy/safetensors"
)

// Writing tensors in two dtypes and reading them back as float32.
func Example() {
	tensors := []safetensors.Tensor{
		{Name: "model.norm.weight", DType: safetensors.F32, Shape: []int{3}, Float32: []float32{1, 0.5, 0.25}},
		// BF16 keeps 8 significant bits: 3.14159 rounds to 3.140625.
		{Name: "model.embed_tokens.weight", DType: safetensors.BF16, Shape: []int{2, 2}, Float32: []float32{3.14159, -1, 0, 2}},
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		panic(err)
	}

	f, err := safetensors.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		panic(err)
	}
	for _, t := range f.Tensors() {
		v, err := f.Float32(t.Name)
		if err != nil {
			panic(err)
		}
		fmt.Println(t.Name, t.DType, t.Shape, v)
	}
	fmt.Println(f.Metadata())
	// Output:
	// model.norm.weight F32 [3] [1 0.5 0.25]
	// model.embed_tokens.weight BF16 [2 2] [3.140625 -1 0 2]
	// map[format:pt]
}

// Writing a sharded checkpoint whose tensors are read only as they are
// written (Tensor.Fill): the shards and headers are laid out from the
// shapes first, then each Fill runs once, one tensor at a time, in data
// order, into one reused buffer — what policy.WriteModel does to write a
// model of any size with one tensor in memory.
func ExampleWriteCheckpoint() {
	dir, err := os.MkdirTemp("", "safetensors-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// A source of weights held elsewhere: here, computed.
	read := func(name string, dst []float32) error {
		fmt.Println("read", name, len(dst))
		for i := range dst {
			dst[i] = float32(i) / 4
		}
		return nil
	}
	var tensors []safetensors.Tensor
	for _, name := range []string{"model.norm.weight", "model.embed_tokens.weight"} {
		tensors = append(tensors, safetensors.Tensor{Name: name, DType: safetensors.BF16, Shape: []int{4, 8},
			Fill: func(dst []float32) error { return read(name, dst) }})
	}
	// 64 bytes per tensor in BF16: one tensor per shard.
	if err := safetensors.WriteCheckpoint(dir, tensors, nil, 64); err != nil {
		panic(err)
	}

	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		panic(err)
	}
	defer ck.Close()
	v, err := ck.Float32("model.norm.weight")
	if err != nil {
		panic(err)
	}
	fmt.Println(ck.Names(), v[:5])
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Output:
	// read model.embed_tokens.weight 32
	// read model.norm.weight 32
	// [model.embed_tokens.weight model.norm.weight] [0 0.25 0.5 0.75 1]
	// model-00001-of-00002.safetensors
	// model-00002-of-00002.safetensors
	// model.safetensors.index.json
}
