from rcattr.eval.kv_long.cli import main

raise SystemExit(main())
