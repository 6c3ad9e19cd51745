import sys

from rcattr.eval.common.run_lock import command_lock

# the run folder is held before torch, the model and the data load: a second run on it is refused at once
with command_lock(sys.argv[1:], default_out="runs/citations"):
    from rcattr.eval.citations.cli import main

    raise SystemExit(main())
