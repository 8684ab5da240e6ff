package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

type versionInfo struct {
	Hap string `json:"hap"`
	Go  string `json:"go"`
}

func runVersion(e *env, args []string) error {
	fs := flags(e, "version", "[--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	v := versionInfo{Hap: "dev", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v.Hap = s.Value[:12]
			}
		}
	}
	if *asJSON {
		return writeJSON(e, v)
	}
	fmt.Fprintf(e.stdout, "hap %s\ngo  %s\n", v.Hap, v.Go)
	return nil
}
