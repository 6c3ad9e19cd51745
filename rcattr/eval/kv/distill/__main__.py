"""`python -m rcattr.eval.kv.distill`: fit a distilled eviction score for a model."""

from rcattr.eval.kv.distill.cli import main

if __name__ == "__main__":
    main()
