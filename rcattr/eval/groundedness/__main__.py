import sys

from rcattr.eval.common.run_lock import exit_if_locked

# a folder another run writes is refused before torch loads
exit_if_locked(sys.argv[1:], default_out="runs/groundedness")

from rcattr.eval.groundedness.benchmark import main  # noqa: E402

main()
