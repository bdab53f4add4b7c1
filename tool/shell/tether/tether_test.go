package tether_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deputy-run/deputy/tool/shell/tether"
)

// workerEnv makes the test binary a mini worker (TestMain): it starts its
// argument with bash through tether.Start, says "started" and waits to be
// killed, as deputy worker does with a running bash call.
const workerEnv = "TETHER_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		cmd, _, err := tether.Start(func() *exec.Cmd {
			cmd := exec.Command("bash", "-c", os.Args[len(os.Args)-1])
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			return cmd
		}, (*exec.Cmd).Start)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("started", tether.Mode())
		_ = cmd.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// marked lists the live processes whose environment holds mark.
func marked(t *testing.T, mark string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range ents {
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains("\x00"+string(env)+"\x00", "\x00"+mark+"\x00") {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			live = append(live, e.Name()+" "+string(stat))
		}
	}
	return live
}

// The case, with real processes: a worker is SIGKILLed while a
// command it started is running, one that left a job behind in a session
// of its own (setsid, out of the process group's reach) and one in the
// background, each about to append to a file. Nothing of it may survive
// the worker, and the file must never be written.
func TestKilledWorkerTakesItsCommandsWithIt(t *testing.T) {
	t.Parallel()
	if m := tether.Mode(); m != tether.ModePIDNamespace && m != tether.ModeUserPIDNamespace {
		if os.Getenv("DEPUTY_REQUIRE_ISOLATION") != "" {
			t.Fatalf("no PID namespaces here (%s), though CI runs as root where they work", m)
		}
		t.Skipf("no PID namespaces here (%s): a job that left the group would survive", m)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	mark := fmt.Sprintf("TETHER_TEST_MARK=%d", time.Now().UnixNano())
	script := fmt.Sprintf(`(setsid bash -c 'sleep 1; echo setsid >> %[1]s' &)
(sleep 1; echo background >> %[1]s) &
nohup bash -c 'sleep 1; echo nohup >> %[1]s' >/dev/null 2>&1 &
sleep 1; echo foreground >> %[1]s`, file)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := exec.Command(exe, "-test.run=^$", script)
	w.Env = append(os.Environ(), workerEnv+"=1", mark)
	out, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "started") {
		_ = w.Process.Kill()
		_ = w.Wait()
		t.Fatalf("worker: %q %v", line, err)
	}
	// Until the jobs are all there: bash, the setsid'd bash and its sleep,
	// the subshell and its sleep, the nohup'd bash and its sleep, sleep.
	deadline := time.Now().Add(10 * time.Second)
	for len(marked(t, mark)) < 8 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(marked(t, mark)); n < 8 {
		t.Fatalf("only %d of the command's processes started: %v", n, marked(t, mark))
	}
	_ = w.Process.Signal(syscall.SIGKILL)
	_ = w.Wait()
	// The kernel's teardown is not instant: a short bound, polled.
	for deadline := time.Now().Add(5 * time.Second); len(marked(t, mark)) > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if live := marked(t, mark); len(live) > 0 {
		for _, p := range live {
			var pid int
			fmt.Sscan(p, &pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("processes of the killed worker's command survived it: %v", live)
	}
	// No process of the command is left to write (each inherits mark,
	// and the poll above saw none alive): what the file can show is a
	// write made before the kill.
	if b, err := os.ReadFile(file); err == nil {
		t.Errorf("the file was written after the worker died: %q", b)
	}
}

// OnLockedThread keeps its goroutine, and with it the thread, until
// release; a panic in f reaches the caller.
func TestOnLockedThread(t *testing.T) {
	t.Parallel()
	ran := false
	release := tether.OnLockedThread(func() { ran = true })
	release()
	release() // idempotent
	if !ran {
		t.Error("f did not run")
	}
	defer func() {
		if p := recover(); p != "boom" {
			t.Errorf("recovered %v, want the panic of f", p)
		}
	}()
	tether.OnLockedThread(func() { panic("boom") })
}
