"""`python -m flower` is the `flower` command."""

from flower.cli import main

if __name__ == "__main__":
    main()
