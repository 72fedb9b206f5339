package atomicfile_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentrl/agentrl/internal/atomicfile"
)

func Example() {
	dir, err := os.MkdirTemp("", "atomicfile-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "trainer_state.json")

	// Whole content at once.
	if err := atomicfile.WriteFile(path, []byte(`{"step": 10}`+"\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	// Streamed content: an encoder writes into the temporary file.
	if err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(map[string]int{"step": 20})
	}); err != nil {
		fmt.Println(err)
		return
	}
	// A failing writer leaves the previous content in place.
	err = atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return fmt.Errorf("encoder failed")
	})
	fmt.Println(err != nil)
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	// Output:
	// true
	// {"step":20}
}
