package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// watch is the watchdog's tick, for boxes without a pids cgroup: it counts
// the tasks of every running command and kills them all when the total is
// over the limit, then re-arms itself while commands run.
func (b *Box) watch() {
	b.mu.Lock()
	runs := make([]*run, 0, len(b.runs))
	for r := range b.runs {
		runs = append(runs, r)
	}
	b.mu.Unlock()
	total := 0
	for _, r := range runs {
		total += r.tasks()
	}
	if total > b.p.MaxProcesses {
		for _, r := range runs {
			r.kill(fmt.Sprintf("killed: more than %d processes (watchdog)", b.p.MaxProcesses))
		}
	}
	b.mu.Lock()
	b.watchdog = nil
	if len(b.runs) > 0 && !b.released {
		b.watchdog = b.p.Clock.AfterFunc(watchdogEvery, b.watch)
	}
	b.mu.Unlock()
}

// tasks counts the command's tasks (threads included, as the pids
// controller does): bwrap's init and all its descendants, which are all
// the processes of the sandbox's PID namespace, orphans included (init is
// their reaper).
func (r *run) tasks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.fd.exited() {
		return 0
	}
	return countTasks(r.pid)
}

// countTasks walks /proc from pid through every thread's children list.
// A process that exits meanwhile is skipped.
func countTasks(pid int) int {
	n := 0
	stack := []int{pid}
	seen := map[int]bool{}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		dir := "/proc/" + strconv.Itoa(p) + "/task"
		tids, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		n += len(tids)
		for _, t := range tids {
			b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					stack = append(stack, c)
				}
			}
		}
	}
	return n
}
