//go:build linux

package shell

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// awaitExit must return once the leader has exited but leave it a zombie:
// that is what keeps its pid (the group id) from being reused before the
// group kill. cmd.Wait then still reaps it and sees its real status.
func TestAwaitExitLeavesLeaderUnreaped(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "exit 3")
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !awaitExit(cmd.Process) {
		_ = cmd.Wait()
		t.Fatal("awaitExit could not wait")
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatalf("the leader was reaped by awaitExit: %v", err)
	}
	// pid (comm) state ...
	if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) == 0 || f[0] != "Z" {
		t.Errorf("leader state: %q, want a zombie (Z)", stat)
	}
	killGroup(cmd.Process) // the group is empty but its id still reserved: harmless
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("Wait after awaitExit: %v, state %v", err, cmd.ProcessState)
	}
}
