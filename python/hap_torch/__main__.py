"""python -m hap_torch FILE.py:FACTORY -o OUT.json: what `hap import` runs."""

import argparse
import sys

from .export import export_factory


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hap_torch")
    p.add_argument("factory", help="FILE.py:FACTORY, a callable returning (model, inputs, loss)")
    p.add_argument("-o", "--output", required=True, help="raw hap.aten JSON to write")
    a = p.parse_args(argv)
    try:
        export_factory(a.factory, a.output)
    except Exception as e:  # one line for hap's error message
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"hap_torch: {type(e).__name__}: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
