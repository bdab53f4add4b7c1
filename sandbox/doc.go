// Package sandbox runs a child's programs confined: the "sandbox" and
// "container" isolation levels. Every program runs under bubblewrap
// (bwrap) as an unprivileged user in fresh namespaces, sees a read-only
// system (the host's system directories, or a separate root filesystem for
// the container level), can write only its roots (the workspace and granted
// paths), has a private /tmp (the session's, kept between its commands),
// no network unless granted (a private loopback otherwise), its own PID
// namespace, and CPU, memory and process-count limits. A Box is one child
// session's sandbox: it owns the cgroups, the /tmp directory, the
// placeholders of absent protected paths, the optional copy-on-write
// snapshot of the workspace (kept only on Commit), and the hard timeout.
//
// # What the sandbox sees
//
// Without a root filesystem the system is the host's /usr, /bin, /sbin,
// /lib*, /etc and /opt, read-only, and not the whole host "/": the rest
// holds home directories, deputy's configuration in them (API keys) and
// the host's /run sockets, none of which a child needs. What lies inside
// the workspace is visible, but for Policy.Hide (deputy's .deputy, with its
// database of every run's transcripts: an empty read-only tmpfs stands
// in); Policy.Protect makes parts of it read-only (a repository's .git,
// deputy's definitions and deputy.yaml), whether or not they exist: a
// missing one gets an empty placeholder in the workspace, mounted
// read-only, which Close removes if it is still the box's and empty and
// no other live box on the workspace binds it (guard.go: the boxes record
// what they bind in the state directory, under a lock), so a program
// cannot create a definition or a configuration deputy would trust at its
// next run. When deputy runs as root, bwrap maps the sandbox
// user (uid 65534 inside) to host uid 0, the owner of root's 0600 files,
// so what other users may not read in the system directories is masked:
// an empty tmpfs over a directory, /dev/null over a file. The sandbox
// reads what any user of the host may read.
//
// # Killing
//
// bwrap's init is pid 1 of the sandbox's PID namespace, and when it dies
// the kernel kills everything in the namespace and only then lets init's
// exit complete. So the box holds a pidfd on init (taken while bwrap waits
// on its block fd, so the pid cannot have been reused), and ending a
// command means: SIGKILL init through the pidfd and wait for the pidfd to
// report the exit. Once that returns, nothing the command started is alive,
// whatever it did (setsid, double fork, a fork bomb).
//
// # Limits
//
// Every box has limits, defaults when the Policy gives none. Memory and
// CPU bandwidth are the box's as a whole, on a cgroup per Box in each
// hierarchy holding the controller (cgroup v1 memory and cpu, or v2 with
// them delegated; package sandbox/cgroup finds, makes and reads them),
// into which init is moved before it forks: the memory
// limit (no swap beyond it) over which the kernel kills the box's largest
// process and the command's note says so, and a CFS quota that slows a
// box using more than its CPUs. CPU seconds are RLIMIT_CPU, set on init
// with prlimit(2) before it forks the command, so they hold for every
// process (each its own budget, as rlimits go). Where no memory cgroup can
// be made the memory limit is each process's RLIMIT_DATA (what it writes,
// not what it reserves: V8, the JVM and Go still start); where no CPU
// cgroup can be made only RLIMIT_CPU bounds CPU. The process count is the
// pids controller's pids.max on the same cgroups. Root ignores
// RLIMIT_NPROC, so where no pids cgroup can be made a watchdog counts the
// tasks of every running command at a fixed period and kills the box's
// commands when the total exceeds the limit; it reacts within a period,
// not at the fork.
//
// # Landlock
//
// The package does not apply Landlock to sandboxed programs. bwrap's mount
// namespace already gives them a file view in which only the roots are
// writable and nothing outside the system and the roots exists, so a
// Landlock rule set inside would restate the same boundary for the same
// attacker. Applying it needs a helper executable inside every sandbox
// (Landlock restricts the calling thread and its future children, and bwrap
// 0.8 cannot do it): re-executing deputy's own binary would make every
// program that embeds the library cooperate from its main, would not run
// inside a container root filesystem when the binary is dynamically linked
// (race-enabled test binaries are), and costs a Go runtime start per call
// against a 20 ms budget. Check still reports the kernel's Landlock ABI,
// because the in-process file tools are where it can add a boundary.
package sandbox
