// Package executor runs distributed programs: it lowers a plan's program
// for every device, derives each device's training step, feeds each device
// its shards, and steps all devices together over a backend. The CPU
// backend runs N virtual devices as goroutines of one process exchanging
// data in memory (package cpu), which is how hap proves a distributed
// program equal to single-device training (Verify).
//
// executor imports ir, encode, lower and cpu; nothing imports it but the
// command line and bench.
package executor
