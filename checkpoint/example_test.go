package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrl/agentrl/checkpoint"
)

func ExampleRoot_Save() {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	root := checkpoint.Root{Dir: dir}
	for _, step := range []int{10, 20} {
		_, err := root.Save(context.Background(), step, func(ctx context.Context, ckpt string) error {
			// Write the model, the optimizer state, the data cursor… Save
			// fsyncs them before it commits the folder.
			return os.WriteFile(filepath.Join(ckpt, "trainer_state.json"), fmt.Appendf(nil, `{"step":%d}`, step), 0o644)
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
