//go:build !race

package benchsub

// raceSlowdown: see orchestrate_race_test.go.
const raceSlowdown = 1
