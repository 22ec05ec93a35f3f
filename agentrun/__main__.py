"""`python -m agentrun`. Guarded: worker processes re-import the main module."""

if __name__ == "__main__":
    from agentrun.cli.app import main

    main()
