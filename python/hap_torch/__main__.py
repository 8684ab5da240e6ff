"""python -m hap_torch FILE.py:FACTORY -o OUT.json: what `hap import` runs."""

import argparse
import sys

from .export import export_factory, export_reference


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hap_torch")
    p.add_argument("factory", help="FILE.py:FACTORY, a callable returning (model, inputs, loss)")
    p.add_argument("-o", "--output", required=True, help="raw hap.aten JSON to write")
    p.add_argument("--reference", metavar="DIR",
                   help="also run the factory for real in float64 and write its weights, inputs, loss and gradients to DIR")
    a = p.parse_args(argv)
    try:
        export_factory(a.factory, a.output)
        if a.reference:
            export_reference(a.factory, a.reference)
    except Exception as e:  # one line for hap's error message
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"hap_torch: {type(e).__name__}: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
