import sys

from rcattr.eval.common.run_lock import exit_if_locked

# a folder another run writes is refused before torch loads
exit_if_locked(sys.argv[1:])

from rcattr.eval.kv_long.cli import main  # noqa: E402

raise SystemExit(main())
