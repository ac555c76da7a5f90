"""`python -m dnaembed` (also what `torchrun -m dnaembed` runs)."""

from dnaembed.cli import main

if __name__ == "__main__":
    main()
