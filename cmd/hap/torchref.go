package main

import (
	"fmt"

	"hap/models"
	"hap/torchref"
)

// verifyAgainstTorch is hap verify --against-torch DIR: the imported
// graph's single-device float64 step from the reference's weights and
// batch, against PyTorch's loss and gradients.
func verifyAgainstTorch(e *env, model, dir string, tol float64, asJSON bool) error {
	if tol == 0 {
		tol = torchref.Tolerance
	}
	g, err := models.Load(model, models.Options{})
	if err != nil {
		return err
	}
	ref, err := torchref.Read(dir)
	if err != nil {
		return err
	}
	rep, err := torchref.Check(g, ref)
	if err != nil {
		return err
	}
	ok := rep.Pass(tol)
	if asJSON {
		if err := writeJSON(e, struct {
			*torchref.Report
			Tolerance float64 `json:"tolerance"`
			Pass      bool    `json:"pass"`
		}{rep, tol, ok}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "%s: hap's CPU step vs PyTorch %s (%s), float64, %s parameters from %s\n", rep.Model, ref.Torch, ref.Name, humanCount(rep.Params), dir)
		if rep.Dropouts > 0 || len(ref.DropoutZeroed) > 0 {
			fmt.Fprintf(e.stdout, "  dropout off on both sides: %s at rate 0 in hap, %s at p = 0 in PyTorch\n", plural(rep.Dropouts, "op"), plural(len(ref.DropoutZeroed), "module"))
		}
		fmt.Fprintf(e.stdout, "  loss       hap %.17g  torch %.17g  rel %.3g\n", rep.HapLoss, rep.TorchLoss, rep.Loss.Rel)
		worstGrad := torchref.Diff{}
		for _, d := range rep.Grads {
			if d.Rel >= worstGrad.Rel {
				worstGrad = d
			}
		}
		fmt.Fprintf(e.stdout, "  gradients  %d tensors, worst %s: max abs %.3g of max %.3g, rel %.3g\n", len(rep.Grads), worstGrad.Name, worstGrad.MaxAbs, worstGrad.Scale, worstGrad.Rel)
		verdict := "PASS"
		if !ok {
			verdict = "FAIL"
		}
		fmt.Fprintf(e.stdout, "%s: max relative difference %.3g (%s), tolerance %.0g\n", verdict, rep.Worst.Rel, rep.Worst.Name, tol)
	}
	if !ok {
		return fmt.Errorf("%s differs from PyTorch's by %.3g relative (max abs %.3g), over the tolerance %.0g", rep.Worst.Name, rep.Worst.Rel, rep.Worst.MaxAbs, tol)
	}
	return nil
}
