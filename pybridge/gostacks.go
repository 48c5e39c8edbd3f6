package pybridge

import "runtime"

// GoStacks returns the stacks of every goroutine, as a Go program's SIGQUIT would
// print them, for a hang's post-mortem (what the DAG's lanes, the progress thread and
// the executor are waiting on). It stops the world while it copies them.
func GoStacks() (s string, err error) {
	defer guard(&err)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= 64<<20 {
			return string(buf[:n]) + "\n... (truncated at 64 MiB)\n", nil
		}
		buf = make([]byte, 2*len(buf))
	}
}
