package safetensors_test

import (
	"bytes"
	"fmt"

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
