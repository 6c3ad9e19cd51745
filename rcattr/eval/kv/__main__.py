from rcattr.eval.kv.cli import main

raise SystemExit(main())
