package agentrl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrl/agentrl"
)

func ExampleWriteFileAtomic() {
	dir, err := os.MkdirTemp("", "agentrl-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config.json")
	// Readers see the old file or the new one, never a part of it.
	if err := agentrl.WriteFileAtomic(path, []byte(`{"step": 10}`), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(path)
	fmt.Println(string(b))
	// Output: {"step": 10}
}

func ExampleCheckpointRoot_Save() {
	dir, err := os.MkdirTemp("", "agentrl-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	root := agentrl.CheckpointRoot{Dir: dir}
	for _, step := range []int{10, 20} {
		_, err := root.Save(context.Background(), step, func(ctx context.Context, ckpt string) error {
			// Write the model, the optimizer state, the data cursor…
			return agentrl.WriteFileAtomic(filepath.Join(ckpt, "trainer_state.json"),
				fmt.Appendf(nil, `{"step":%d}`, step), 0o644)
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	step, ckpt, err := root.Latest()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(step, filepath.Base(ckpt))
	if err := root.Prune(1); err != nil { // keep only the newest
		fmt.Println(err)
		return
	}
	steps, _ := root.Steps()
	fmt.Println(steps)
	// Output:
	// 20 step-20
	// [20]
}
