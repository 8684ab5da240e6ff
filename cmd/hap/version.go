package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"hap/solve/milp/cbc"
	"hap/solve/z3"
)

type versionInfo struct {
	Hap string `json:"hap"`
	Go  string `json:"go"`
	Z3  string `json:"z3"`
	CBC string `json:"cbc"`
}

func runVersion(e *env, args []string) error {
	fs := flags(e, "version", "[--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	v := versionInfo{Hap: "dev", Go: runtime.Version(), Z3: z3.Version(), CBC: cbc.Version()}
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
	fmt.Fprintf(e.stdout, "hap %s\ngo  %s\nz3  %s\ncbc %s\n", v.Hap, v.Go, v.Z3, v.CBC)
	return nil
}
