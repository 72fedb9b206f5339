package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrl/agentrl/tool"
)

// The code interpreter runs the model's Python in the local sandbox; where
// no python3 exists, the calculator is the fallback.
func ExampleNewCodeInterpreter() {
	var tools []tool.Tool
	ci, err := tool.NewCodeInterpreter(tool.SandboxConfig{Workers: 2, Timeout: 5 * time.Second})
	switch {
	case errors.Is(err, tool.ErrNoPython):
		tools = append(tools, &tool.Calculator{})
	case err != nil:
		panic(err)
	default:
		defer ci.Close()
		tools = append(tools, ci)
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		panic(err)
	}
	res, err := reg.Call(context.Background(), "code_interpreter",
		json.RawMessage(`{"code": "`+"```python\\nprint(2**100 % 1000)\\n```"+`"}`))
	fmt.Println(res.Content, res.Failed, res.Metadata["isolation"], err)
}

func ExampleFunctionSchema() {
	fmt.Println(string(tool.FunctionSchema("lookup", "Looks a word up.",
		tool.Param{Name: "word", Type: "string", Required: true})))
	// Output:
	// {"type": "function", "function": {"name": "lookup", "description": "Looks a word up.", "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}}
}

// A SandboxFusion cluster runs the same tool at scale.
func ExampleNewSandboxFusion() {
	sf, err := tool.NewSandboxFusion(tool.SandboxFusionConfig{URL: "http://sandbox.internal:8080", MaxConcurrent: 64})
	if err != nil {
		panic(err)
	}
	ci, err := tool.NewCodeInterpreterOn(sf, tool.OutputBudget{Chars: 4096})
	if err != nil {
		panic(err)
	}
	fmt.Println(ci.Name())
	// Output: code_interpreter
}

// Check at start makes a program fail at once where no SandboxFusion
// server answers, rather than at its first tool call.
func ExampleSandboxFusion_Check() {
	sf, err := tool.NewSandboxFusion(tool.SandboxFusionConfig{URL: "http://sandbox.internal:8080"})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sf.Check(ctx); err != nil {
		fmt.Println(err) // tool: SandboxFusion check failed: http://sandbox.internal:8080 does not answer: …
		return
	}
	fmt.Println("ready")
}

// A GRPO group's samples of one prompt often make the same call; a Cache
// runs a deterministic tool once per distinct call and answers the rest
// from the kept result.
func ExampleNewCache() {
	c, err := tool.NewCache(&tool.Calculator{}, tool.CacheConfig{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, args := range []string{`{"expression": "123456 * 789"}`, `{"expression":"123456 * 789"}`, `{"expression": "2**20"}`} {
		r, err := c.Call(ctx, json.RawMessage(args))
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Content, r.Metadata["cache"])
	}
	st := c.Stats()
	fmt.Printf("%d calls, %d run, %d from the cache\n", st.Calls, st.Executed, st.Hits)
	// Output:
	// 97406784 <nil>
	// 97406784 hit
	// 1048576 <nil>
	// 3 calls, 2 run, 1 from the cache
}
