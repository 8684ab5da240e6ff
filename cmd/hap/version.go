package main

import (
	"fmt"
	"runtime"

	"hap/milp/cbc"
	"hap/plan"
	"hap/solve/z3"
)

type versionInfo struct {
	Hap string `json:"hap"`
	Go  string `json:"go"`
	Z3  string `json:"z3"`
	CBC string `json:"cbc"`
}

func runVersion(e *env, args []string) error {
	fs := flags(e, "version")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	v := versionInfo{Hap: plan.HapVersion(), Go: runtime.Version(), Z3: z3.Version(), CBC: cbc.Version()}
	if *asJSON {
		return writeJSON(e, v)
	}
	fmt.Fprintf(e.stdout, "hap %s\ngo  %s\nz3  %s\ncbc %s\n", v.Hap, v.Go, v.Z3, v.CBC)
	return nil
}
