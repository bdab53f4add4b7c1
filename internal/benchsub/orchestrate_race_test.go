//go:build race

package benchsub

// raceSlowdown: the race detector makes a durable task's start (its
// workflow, load and start steps on SQLite's one writer) several times
// slower, so the tests give durable tasks longer turns to overlap in.
const raceSlowdown = 4
