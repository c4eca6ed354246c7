from hangdoc.cli import main

raise SystemExit(main())
