package main

import (
	"strings"
	"testing"
)

// FuzzCommandFlags feeds every command's flag parser mutated command
// lines: a command name from the fuzzer's first word, its flags from the
// rest, and --help last, so that a line whose flags all parse stops at
// the help rather than plan or train (pflag stops at --help wherever the
// arguments around it are). Whatever the flags, the answer is a usage
// error or the help: never a panic, never a command run.
func FuzzCommandFlags(f *testing.F) {
	for _, seed := range []string{
		"plan --model mlp-tiny --cluster paper-8 --time-limit 1ns",
		"plan --batch 9223372036854775807 --node-limit -1 --devices ''",
		"train --model mlp-tiny --lr -1 --max-memory 1x",
		"verify --tolerance -1 --dtype int64 --steps 0",
		"run --nproc 99999999999 --block 3",
		"simulate --order-window -4 --search-order",
		"models export vit --batch 0 -o",
		"explain --each-layer=maybe",
		"bench --suite nope --time-limit 5parsecs",
	} {
		f.Add(seed)
	}
	names := map[string]bool{}
	for _, c := range commands() {
		names[c.name] = true
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) == 0 || !names[args[0]] || len(args) > 64 {
			return
		}
		for _, a := range args {
			if a == "--" {
				return // the --help after it would be an argument, and the command would run
			}
			if strings.HasPrefix(a, "-h") || strings.HasPrefix(a, "--h") {
				return // help by another spelling: fine, and not a parse
			}
		}
		// --help twice: a last flag that wants a value takes the first.
		code, _, stderr := runCLI(append(args, "--help", "--help")...)
		switch code {
		case 0, 2:
		default:
			t.Fatalf("hap %s --help: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		if strings.Contains(stderr, "panic") {
			t.Fatalf("hap %s --help: %s", strings.Join(args, " "), stderr)
		}
	})
}
