//go:build race

package z3

// raceEnabled: the race detector's shadow memory and history make resident-memory measurements
// meaningless, so TestMemoryFlat skips under -race.
const raceEnabled = true
