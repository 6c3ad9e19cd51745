from rcattr.eval.attribution.cli import main

raise SystemExit(main())
