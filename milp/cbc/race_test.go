//go:build race

package cbc

// raceEnabled: the race detector's shadow memory and history make resident-memory measurements
// meaningless, so TestMemoryFlat skips under -race.
const raceEnabled = true
