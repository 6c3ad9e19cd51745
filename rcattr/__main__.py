from rcattr.cli import main

raise SystemExit(main())
