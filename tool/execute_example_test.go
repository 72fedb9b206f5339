package tool_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/agentrl/agentrl/tool"
)

// Under the code interpreter tool, an Executor runs one program and
// reports what it did as a typed result — status, output, exit code,
// signal, and what the call used of its budget — which code-test rewards
// read directly. The local Sandbox and the SandboxFusion client both
// implement it (tool.CodeInterpreter.Executor returns the one a tool runs
// on). It needs python3, so go test compiles this example without running
// it.
func ExampleSandbox_Execute() {
	ctx := context.Background()
	sb, err := tool.NewSandbox(ctx, tool.SandboxConfig{Workers: 1, Timeout: 5 * time.Second})
	if errors.Is(err, tool.ErrNoPython) {
		fmt.Println("no python3 on this machine")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()
	var ex tool.Executor = sb
	res, err := ex.Execute(ctx, tool.ExecRequest{Code: "import sys\nn = int(sys.stdin.read())\nprint(n * n)\nsys.exit(3)", Stdin: "12\n"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("status %s, exit code %d, stdout %q\n", res.Status, res.ExitCode, res.Stdout)
	res, err = ex.Execute(ctx, tool.ExecRequest{Code: "while True: pass", Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("status %s, signal %s\n", res.Status, res.Signal)
	// With python3 it prints:
	//
	//	status error, exit code 3, stdout "144\n"
	//	status timeout, signal SIGKILL
}
