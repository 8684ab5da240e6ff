package main

import (
	"regexp"
	"strings"
	"testing"
)

// Every flag a command registers is named in the usage line its --help
// prints (the synopsis in commands()): a flag missing from it is one a
// user reading the usage does not know exists. --help lists the flag set
// itself (pflag's PrintDefaults), so the test reads both from it.
func TestUsageListsEveryFlag(t *testing.T) {
	names := []string{"models export", "models cost"}
	for _, c := range commands() {
		names = append(names, c.name)
	}
	flagLine := regexp.MustCompile(`^\s+(?:-([A-Za-z]), )?--([a-z0-9-]+)`)
	for _, name := range names {
		code, out, errs := runCLI(append(strings.Fields(name), "--help")...)
		if code != 0 {
			t.Errorf("%s --help: exit %d: %s", name, code, errs)
			continue
		}
		usage, defaults, ok := strings.Cut(out, "\nFlags:\n")
		if !ok || !strings.HasPrefix(usage, "Usage: hap "+name+" ") {
			t.Errorf("%s --help: no usage line and flag list:\n%s", name, out)
			continue
		}
		n := 0
		for _, line := range strings.Split(defaults, "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n++
			long := regexp.MustCompile(`(^|[\s\[(|])--` + regexp.QuoteMeta(m[2]) + `($|[\s\])|=])`)
			short := m[1] != "" && regexp.MustCompile(`(^|[\s\[(|])-`+m[1]+`($|[\s\])|])`).MatchString(usage)
			if !long.MatchString(usage) && !short {
				t.Errorf("hap %s registers --%s, which its usage line does not name:\n%s", name, m[2], usage)
			}
		}
		if n == 0 && name != "help" {
			t.Errorf("%s --help lists no flags:\n%s", name, out)
		}
	}
}

// hap --version is hap version, as users of other tools expect.
func TestVersionFlag(t *testing.T) {
	_, want, _ := runCLI("version")
	for _, args := range [][]string{{"--version"}, {"-version"}} {
		code, out, errs := runCLI(args...)
		if code != 0 || out != want || want == "" {
			t.Errorf("%v: exit %d, stdout %q (hap version: %q), stderr %q", args, code, out, want, errs)
		}
	}
	code, out, _ := runCLI("--version", "--json")
	if _, want, _ := runCLI("version", "--json"); code != 0 || out != want {
		t.Errorf("--version --json: exit %d, %q, want %q", code, out, want)
	}
}
